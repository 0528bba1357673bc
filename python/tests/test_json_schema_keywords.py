"""Structured outputs' keywords pydantic / the openai SDK send that the subset long refused: additionalProperties
true or a schema beside properties (pydantic's extra="allow" and typed __pydantic_extra__), min/maxProperties,
minLength / maxLength beside pattern and format (constr(pattern=..., min_length=..., max_length=...)), and a decimal
multipleOf (Field(multiple_of=0.01)). References: Python's re and len (patterns with lengths, enumerated over small
alphabets) and pydantic (an independent validator of the models). test_json_schema_serve.py samples the served tiny
model under them."""
import ipaddress
import itertools
import json
import random
import re

import pytest

from attnzoo import _core

pydantic = pytest.importorskip("pydantic")
from pydantic import BaseModel, ConfigDict, Field, constr  # noqa: E402


class Tagged(BaseModel):
    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, int]
    code: constr(pattern=r"^[A-Z]{2}\d+$", min_length=4, max_length=6)
    price: float = Field(multiple_of=0.01, ge=0, le=50)
    half: float = Field(default=0, multiple_of=0.5, gt=-5, lt=5)


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str = Field(max_length=6)
    ip: str = Field(json_schema_extra={"format": "ipv4", "maxLength": 11})


def walk_with_keys(schema_text, rng, keys, limit=400):
    """A document the recognizer lets through one random allowed byte at a time, as test_json_schema's walk, but
    where a key may begin it often writes a whole listed key (random bytes seldom spell one, and a required one must
    come among the unlisted keys). None past `limit` bytes; the walk asserts there is no dead end."""
    text = b""
    while len(text) < limit:
        nxt, complete, can_end = _core.json_schema_next_bytes(schema_text, text)
        if complete:
            return text
        assert nxt, f"dead end after {text!r}"
        if ord('"') in nxt and text.rstrip()[-1:] in (b"{", b",") and rng.random() < 0.6:
            key = json.dumps(rng.choice(keys), ensure_ascii=False).encode()
            if _core.json_schema_prefix(schema_text, text + key)[0] == len(text + key):
                text += key
                continue
        closers = [b for b in nxt if b in b'"}]']
        if closers and rng.random() < min(0.9, len(text) / 60):
            text += bytes([rng.choice(closers)])
        else:
            text += bytes([rng.choice(nxt)])
    return None


def listed_in_order(value, model):
    listed = [k for k in model.model_json_schema()["properties"]]
    seen = [k for k in value if k in listed]
    return seen == [k for k in listed if k in seen]


@pytest.mark.parametrize("model", [Tagged, Loose], ids=lambda m: m.__name__)
def test_pydantic_models_compile_and_walks_validate(model):
    schema = model.model_json_schema()
    text = json.dumps(schema)
    _core.check_json_schema(text)  # compiles as pydantic wrote it
    others = 0
    rng = random.Random("kw" + model.__name__)
    docs = [walk_with_keys(text, rng, list(schema["properties"])) for _ in range(80)]
    docs = [d for d in docs if d is not None]
    assert len(docs) >= 30, f"{len(docs)} of 80 walks ended"
    for doc in docs:
        model.model_validate_json(doc)  # raises on anything the model refuses
        value = json.loads(doc)
        assert listed_in_order(value, model), doc
        if "ip" in value:  # pydantic leaves a str's format alone: Python's ipaddress reads it
            assert len(value["ip"]) <= 11 and str(ipaddress.IPv4Address(value["ip"])) == value["ip"], doc
        others += any(k not in schema["properties"] for k in value)
    assert others > 0, "no walk wrote an unlisted key"


def test_documents_pydantic_writes_are_accepted():
    text = json.dumps(Tagged.model_json_schema())
    for obj in [Tagged(code="AB12", price=0.07, half=-4.5, extra_one=3), Tagged(code="ZZ9999", price=49.99)]:
        doc = obj.model_dump_json()
        n, complete, can_end = _core.json_schema_prefix(text, doc.encode())
        assert n == len(doc) and can_end, (doc, n)
    for doc, n in [('{"code":"AB1"', 12), ('{"code":"AB12345"', 15), ('{"code":"AB12","price":0.075', 27),
                   ('{"code":"AB12","price":1,"code":1', 30), ('{"code":"AB12","price":1,"x":"y"', 29)]:
        assert _core.json_schema_prefix(text, doc.encode())[0] == n, doc


@pytest.mark.parametrize("regex,alphabet,lo,hi", [
    (r"^(ab|c)+$", "abc", 3, 5), (r"a+b", "abx", 2, 4), (r"^(aa)+$", "ab", 3, 4), (r"^\d{2,3}$", "12x", 0, 2),
    (r"x", "xy", 4, 6), (r"^(a|\u00e9)+$", "a\u00e9b", 2, 3), (r"^[a-c]*c$", "abc", 2, 4)])
def test_pattern_lengths_exhaustively(regex, alphabet, lo, hi):
    """Every string over `alphabet` of up to hi characters that re.search matches with lo <= len <= hi is a valid
    document; every prefix of one (bytes) and its one-character extensions are accepted iff a valid one starts so."""
    schema = json.dumps({"type": "string", "pattern": regex, "minLength": lo, "maxLength": hi})
    valid = {('"' + "".join(p) + '"').encode() for n in range(lo, hi + 1) for p in itertools.product(alphabet, repeat=n)
             if re.search(regex, "".join(p))}
    prefixes = {v[:k] for v in valid for k in range(len(v) + 1)}
    probes = prefixes | {p + c.encode() for p in prefixes for c in alphabet + '"'}
    for t in sorted(probes):
        n, complete, can_end = _core.json_schema_prefix(schema, t)
        assert (n == len(t)) == (t in prefixes), (regex, t, n)
        if n == len(t):
            assert can_end == (t in valid), (regex, t)


@pytest.mark.parametrize("schema,where,words", [
    ({"type": "string", "format": "date", "maxLength": 9}, "#", "no string of 0 to 9 characters"),
    ({"type": "string", "format": "email", "minLength": 5, "maxLength": 4}, "#", "minimum (5) exceeds the maximum (4)"),
    ({"properties": {"a": {}}, "required": ["a"], "maxProperties": 0}, "#", "maxProperties (0)"),
    ({"properties": {"a": {}}, "additionalProperties": 3}, "#/additionalProperties", "must be a boolean or a schema"),
    ({"properties": {"a": {}}, "additionalProperties": {"not": {}}}, "#/additionalProperties", '"not"'),
])
def test_what_stays_refused_names_its_pointer(schema, where, words):
    with pytest.raises(ValueError) as e:
        _core.check_json_schema(json.dumps(schema))
    msg = str(e.value)
    assert msg.startswith(f"response_format: json_schema at {where}:") and words in msg, msg
