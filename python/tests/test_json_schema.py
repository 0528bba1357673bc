"""Structured outputs' recognizer (src/engine/json_schema_recognizer.h) against an independent oracle: Python's json
module and a JSON Schema validator written here (standard semantics, plus the two rules the subset adds: an object
with `properties` holds no other key, and its keys come in the schema's order).

For ~20 schemas (nested objects, arrays of enums, anyOf, $ref recursion, optional properties, maps, free values):
- documents written by a generator of this file (random values, random whitespace) are accepted on every prefix
  and may end only where json.loads reads a valid document;
- random walks through the recognizer (each step picks one of the bytes it allows) never reach a dead end, and
  every document they end is one json.loads reads and the validator passes;
- mutated documents (a byte deleted, inserted or replaced) that the recognizer takes whole are valid, and the
  byte where it stops one is not the start of any valid document seen."""
import json
import random
from fractions import Fraction

import pytest

from attnzoo import _core

SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 6},
            "age": {"type": "integer"},
            "tags": {"type": "array", "items": {"enum": ["a", "b", 3, None, {"k": [1, True]}]}, "minItems": 1,
                     "maxItems": 3},
            "pet": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/pet"}]},
        },
        "required": ["name", "tags"],
        "$defs": {"pet": {"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "number"}},
                          "required": ["kind"]}},
    },
    "optional_only": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}},
    "nested": {"type": "object", "properties": {
        "user": {"type": "object", "properties": {"id": {"type": "integer"}, "address": {
            "type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string", "maxLength": 5}},
            "required": ["city"]}}, "required": ["id", "address"]},
        "ok": {"type": "boolean"}}, "required": ["user", "ok"], "additionalProperties": False},
    "color_list": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 4},
    "scalar_union": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "null"}, {"type": "integer"}]},
    "tree": {"$ref": "#/definitions/node", "definitions": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/definitions/node"}, "maxItems": 2}},
        "required": ["v"]}}},
    "linked_list": {"$ref": "#/$defs/cell", "$defs": {"cell": {"type": "object", "properties": {
        "head": {"type": "string"}, "tail": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/cell"}]}},
        "required": ["head", "tail"]}}},
    "mixed_enum": {"enum": ["a\"b", "\n", "\u00e9t\u00e9", 1.5, -2, [], [1, [2]], {"x": None}, True, None]},
    "const_object": {"type": "object", "properties": {"v": {"const": {"a": [1, "two"], "b": False}}},
                     "required": ["v"]},
    "map_of_arrays": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "number"}}},
    "anything": {},
    "object_or_array": {"type": ["object", "array"], "properties": {"n": {"type": "integer"}}, "required": ["n"],
                        "items": {"type": "string"}, "maxItems": 2},
    "bounded_strings": {"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 3}, "maxItems": 3},
    "one_of": {"oneOf": [{"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
                         {"type": "array", "items": {"type": "boolean"}}, {"type": "string"}]},
    "top_number": {"type": "number"},
    "top_int_enum": {"enum": [1, 12, 123]},
    "bool_null": {"type": "object", "properties": {"b": {"type": "boolean"}, "n": {"type": "null"},
                                                   "e": {"type": ["boolean", "null"]}}, "required": ["b", "n", "e"]},
    "escaped_keys": {"type": "object", "properties": {"a\"b": {"type": "integer"}, "\u00fc/~": {"type": "string"},
                                                      "back\\slash": {"type": "null"}}, "required": ["\u00fc/~"]},
    "strict_style": {"type": "object", "additionalProperties": False, "required": ["steps", "answer"], "properties": {
        "steps": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                             "required": ["explanation", "output"],
                                             "properties": {"explanation": {"type": "string"},
                                                            "output": {"type": "string"}}}},
        "answer": {"type": "string"}}},
    "array_of_objects": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
        "id": {"type": "integer"}, "label": {"enum": ["x", "y"]}}, "required": ["id", "label"]}},
    "bounded_numbers": {"type": "object", "properties": {
        "n": {"type": "integer", "minimum": -13, "exclusiveMaximum": 40, "multipleOf": 3},
        "x": {"type": "number", "exclusiveMinimum": -0.5, "maximum": 2.25},
        "r": {"type": "array", "items": {"type": ["integer", "null"], "minimum": 100}, "maxItems": 3}},
        "required": ["n", "x"]},
    "tuples_and_all_of": {"type": "object", "properties": {
        "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"enum": ["x", "y"]}], "minItems": 2,
                 "maxItems": 2},
        "head": {"type": "array", "prefixItems": [{"type": "boolean"}], "items": {"type": "null"}, "maxItems": 3},
        "closed": {"prefixItems": [{"type": "string"}, {"type": "number"}], "items": False},
        "wrapped": {"allOf": [{"$ref": "#/$defs/p"}], "description": "a lone $ref, wrapped"},
        "loose": {"allOf": [True, {"title": "t"}]}},
        "required": ["pair", "wrapped"],
        "$defs": {"p": {"type": "object", "properties": {"q": {"type": "integer", "minimum": 0}},
                        "required": ["q"]}}},
    "extra_keys": {"type": "object", "properties": {"id": {"type": "integer"}, "tag": {"enum": ["a", "b"]}},
                   "required": ["id"], "maxProperties": 4,
                   "additionalProperties": {"type": "number", "multipleOf": 0.25, "minimum": -10, "maximum": 10}},
    "loose_object": {"properties": {"a": {"type": "string", "maxLength": 3}, "m": {"type": "object",
                     "additionalProperties": {"type": "integer"}, "maxProperties": 2}},
                     "additionalProperties": True},
    "decimal_steps": {"type": "object", "properties": {
        "cents": {"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 3},
        "half": {"type": "number", "multipleOf": 0.5, "exclusiveMinimum": -2.5},
        "fives": {"type": "integer", "multipleOf": 2.5, "maximum": 100}}, "required": ["cents", "half"]},
    "const_union": {"anyOf": [{"const": "on"}, {"const": "off"}, {"type": "integer"}, {"enum": [True]}]},
}


# ---- the oracle: standard JSON Schema semantics for the keywords used above, plus the subset's two rules ----

def resolve(root, ref):
    node = root
    for part in ref[2:].split("/") if ref != "#" else []:
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def same(a, b):
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def has_type(v, t):
    number = isinstance(v, (int, float)) and not isinstance(v, bool)
    return {"object": isinstance(v, dict), "array": isinstance(v, list), "string": isinstance(v, str),
            "number": number, "integer": number and float(v).is_integer(), "boolean": isinstance(v, bool),
            "null": v is None}[t]


def valid(v, s, root):
    if s is True or s == {}:
        return True
    if "$ref" in s:
        return valid(v, resolve(root, s["$ref"]), root)
    if "anyOf" in s:
        return any(valid(v, b, root) for b in s["anyOf"])
    if "allOf" in s:
        return all(valid(v, b, root) for b in s["allOf"])
    if "oneOf" in s:
        return sum(valid(v, b, root) for b in s["oneOf"]) == 1
    if "const" in s and not same(v, s["const"]):
        return False
    if "enum" in s and not any(same(v, e) for e in s["enum"]):
        return False
    if "type" in s:
        types = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(has_type(v, t) for t in types):
            return False
    if isinstance(v, dict):
        props = s.get("properties", {})
        if any(r not in v for r in s.get("required", [])):
            return False
        extra = s.get("additionalProperties", True)
        if "properties" in s or "required" in s:
            # The subset's rules: the listed keys in the schema's order; no other key unless additionalProperties
            # (true or a schema) says so (absent counts as false).
            if [k for k in v if k in props] != [k for k in props if k in v]:
                return False
            extra = s.get("additionalProperties", False)
            if extra is False and any(k not in props for k in v):
                return False
        if not s.get("minProperties", 0) <= len(v) <= s.get("maxProperties", len(v)):
            return False
        for k, x in v.items():
            if not valid(x, props[k] if k in props else extra, root):
                return False
    if isinstance(v, list):
        if len(v) < s.get("minItems", 0) or len(v) > s.get("maxItems", len(v)):
            return False
        prefix = s.get("prefixItems", [])
        if not all(valid(x, prefix[i] if i < len(prefix) else s.get("items", True), root) for i, x in enumerate(v)):
            return False
    if isinstance(v, str) and not s.get("minLength", 0) <= len(v) <= s.get("maxLength", len(v)):
        return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        checks = {"minimum": v >= s.get("minimum", v), "maximum": v <= s.get("maximum", v),
                  "exclusiveMinimum": "exclusiveMinimum" not in s or v > s["exclusiveMinimum"],
                  "exclusiveMaximum": "exclusiveMaximum" not in s or v < s["exclusiveMaximum"],
                  # Exact decimals (0.3 is a multiple of 0.1): the shortest texts of both, as fractions.
                  "multipleOf": "multipleOf" not in s or
                                (Fraction(repr(v)) / Fraction(repr(s["multipleOf"]))).denominator == 1}
        if not all(checks.values()):
            return False
    return True


def _no_constants(name):
    raise ValueError(name)


def oracle(text, schema):
    """json.loads reads `text` (bytes) as one value (RFC 8259: no NaN) that the schema validates."""
    try:
        value = json.loads(text.decode("utf-8"), parse_constant=_no_constants)
    except (ValueError, UnicodeDecodeError):
        return False
    return valid(value, schema, schema)


# ---- documents written here, not by the recognizer ----

def ws(rng):
    return rng.choice(["", "", " ", "\n  ", "\t"])


def gen_string(rng, lo=0, hi=8):
    alphabet = ["a", "Z", "0", " ", "\u00e9", "\u4e2d", "\U0001F600", "\\n", "\\\"", "\\u0041", "/", "\\/"]
    n = rng.randint(lo, max(lo, min(hi, lo + 6)))
    return '"' + "".join(rng.choice(alphabet) for _ in range(n)) + '"'


def gen(schema, root, rng, depth=0):
    s = schema
    if s is True or s == {}:
        s = {"type": rng.choice(["object", "array", "string", "number", "boolean", "null"] if depth < 3 else
                                ["string", "number", "null"])}
    if "$ref" in s:
        return gen(resolve(root, s["$ref"]), root, rng, depth)
    if "anyOf" in s or "oneOf" in s:
        return gen(rng.choice(s.get("anyOf") or s.get("oneOf")), root, rng, depth)
    if "allOf" in s:
        real = [b for b in s["allOf"] if b is not True and not set(b) <= {"title", "description"}]
        return gen(real[0] if real else True, root, rng, depth)
    if "const" in s or "enum" in s:
        v = s["const"] if "const" in s else rng.choice(s["enum"])
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    types = s.get("type", "object" if "properties" in s or "additionalProperties" in s else "array")
    if t_is_array(types) and "prefixItems" in s:
        prefix, extra = s["prefixItems"], s.get("items", True)
        hi = len(prefix) if extra is False else min(s.get("maxItems", len(prefix) + 2), len(prefix) + 2)
        n = rng.randint(max(s.get("minItems", 0), 0), max(s.get("minItems", 0), hi))
        items = [gen(prefix[i] if i < len(prefix) else extra, root, rng, depth + 1) for i in range(n)]
        return "[" + ws(rng) + ("," + ws(rng)).join(items) + "]"
    t = rng.choice(types) if isinstance(types, list) else types
    if t == "object":
        props, required = s.get("properties"), s.get("required", [])
        if props is None:
            keys = [json.loads(gen_string(rng, 0, 4)) for _ in range(rng.randint(0, 2 if depth < 3 else 0))]
            members = [(k, s.get("additionalProperties", True)) for k in keys]
        else:
            members = [(k, p) for k, p in props.items()
                       if k in required or (depth < 4 and rng.random() < 0.5)]
        body = ("," + ws(rng)).join(json.dumps(k, ensure_ascii=False) + ws(rng) + ":" + ws(rng) +
                                    gen(p, root, rng, depth + 1) for k, p in members)
        return "{" + ws(rng) + body + ws(rng) + "}"
    if t == "array":
        lo = s.get("minItems", 0)
        hi = min(s.get("maxItems", 3), lo + 3 if depth < 3 else lo)
        items = [gen(s.get("items", True), root, rng, depth + 1) for _ in range(rng.randint(lo, max(lo, hi)))]
        return "[" + ws(rng) + ("," + ws(rng)).join(items) + "]"
    if t == "string":
        return gen_string(rng, s.get("minLength", 0), s.get("maxLength", 8))
    if t in ("integer", "number") and any(k in s for k in ("minimum", "maximum", "exclusiveMinimum",
                                                           "exclusiveMaximum", "multipleOf")):
        texts = [str(v) for v in range(-200, 200)] + ["-0.49", "2.25", "0.000", "-0", "1.5"]
        texts = [x for x in texts if (t == "number" or "." not in x) and valid(json.loads(x), s, root)]
        return rng.choice(texts)
    if t == "integer":
        return str(rng.choice([0, 7, -13, 2 ** 40]))
    if t == "number":
        return rng.choice(["0", "-0.5", "3.25e-2", "1E+3", "42"])
    if t == "boolean":
        return rng.choice(["true", "false"])
    return "null"


def t_is_array(types):
    return types == "array" or types == ["array"]


def accepted(schema_text, text):
    return _core.json_schema_prefix(schema_text, text)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_written_documents_are_accepted_on_every_prefix(name):
    schema = SCHEMAS[name]
    text_schema = json.dumps(schema)
    rng = random.Random(name)
    for _ in range(25):
        doc = gen(schema, schema, rng).encode()
        assert oracle(doc, schema), f"the generator wrote an invalid document: {doc!r}"
        n, complete, can_end = accepted(text_schema, doc)
        assert n == len(doc), f"refused at byte {n}: {doc[:n + 1]!r}"
        assert can_end, doc
        for k in range(len(doc)):
            n, complete, can_end = accepted(text_schema, doc[:k])
            assert n == k and not complete, doc[:k]
            assert not can_end or oracle(doc[:k], schema), f"may end at {doc[:k]!r}, which is not valid"


def walk(schema_text, rng, limit=400, grow=False):
    """A document the recognizer lets through one random allowed byte at a time (None past `limit` bytes). `grow`
    walks favour ',' '[' '{' (more items and properties, deeper) for their first 150 bytes; all favour closing
    quotes and brackets as they get long."""
    text = b""
    while len(text) < limit:
        nxt, complete, can_end = _core.json_schema_next_bytes(schema_text, text)
        if complete or (can_end and rng.random() < 0.3):
            return text, complete
        assert nxt, f"dead end after {text!r}: no byte may follow and the document is not whole"
        openers = [b for b in nxt if b in b",[{"]
        closers = [b for b in nxt if b in b'"}]']
        if grow and openers and len(text) < 150 and rng.random() < 0.5:
            text += bytes([rng.choice(openers)])
        elif closers and rng.random() < min(0.9, len(text) / (200 if grow else 80)):
            text += bytes([rng.choice(closers)])
        else:
            text += bytes([rng.choice(nxt)])
    return None, False


def walks(schema_text, seed, tries, at_least, limit=400, alternate=False):
    """The documents of `tries` walks (seeded by `seed`) that ended within `limit` bytes: at least `at_least` of
    them. `alternate`: every second walk grows (see walk)."""
    rng = random.Random(seed)
    docs = [walk(schema_text, rng, limit, alternate and i % 2 == 1)[0] for i in range(tries)]
    docs = [d for d in docs if d is not None]
    assert len(docs) >= at_least, f"{len(docs)} of {tries} walks ended"
    return docs


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_random_walks_through_the_recognizer_end_in_valid_documents(name):
    schema = SCHEMAS[name]
    for doc in walks(json.dumps(schema), "walk" + name, 40, 15, alternate=True):
        assert oracle(doc, schema), f"the recognizer let through an invalid document: {doc!r}"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_mutated_documents(name):
    schema = SCHEMAS[name]
    text_schema = json.dumps(schema)
    rng = random.Random("mutate" + name)
    docs = {gen(schema, schema, rng).encode() for _ in range(60)}
    alphabet = b'{}[]":,-.0123456789eEtrufalsn \\/ab\xc3\xa9'
    taken = refused = 0
    for doc in sorted(docs):
        for _ in range(8):
            i = rng.randrange(len(doc) + 1)
            op = rng.randrange(3)
            c = bytes([rng.choice(alphabet)])
            m = doc[:i] + c + doc[i:] if op == 0 else doc[:i] + c + doc[i + 1:] if op == 1 else doc[:i] + doc[i + 1:]
            n, complete, can_end = accepted(text_schema, m)
            if n == len(m) and can_end:
                taken += 1
                assert oracle(m, schema), f"accepted an invalid document: {m!r}"
            elif n < len(m):
                refused += 1
                bad = m[:n + 1]
                assert not any(d.startswith(bad) for d in docs), f"refused byte {n} of {m!r}, a valid prefix"
    assert refused > 0


BAD = [
    ({"type": "string", "pattern": "(a)\\1"}, "pattern", "#/pattern"),
    ({"properties": {"d": {"type": "string", "format": "hostname"}}}, '"hostname"', "#/properties/d/format"),
    ({"type": "number", "multipleOf": 1e-13}, "multipleOf", "#/multipleOf"),
    ({"type": "object", "properties": {"xa": {}}, "patternProperties": {"^x": {}}}, "also matches",
     "#/properties/xa"),
    ({"type": "object", "patternProperties": {"^x": {}, "y$": {}}}, "both match", "#/patternProperties"),
    ({"type": "object", "propertyNames": {"not": {}}}, '"not" in propertyNames', "#/propertyNames"),
    ({"properties": {"e": {"type": "string", "format": "email", "maxLength": 4}}}, "no email address",
     "#/properties/e"),
    ({"anyOf": [{"type": "object"}, {"type": "object", "properties": {"a": {}}}]}, "begin with", "#"),
    ({"$ref": "https://example.com/s.json"}, "$ref", "#/$ref"),
    ({"allOf": [{"type": "integer"}, {"minimum": 3}]}, "allOf with more than one", "#/allOf"),
]


@pytest.mark.parametrize("schema,keyword,pointer", BAD)
def test_unsupported_keywords_are_refused_by_name(schema, keyword, pointer):
    with pytest.raises(ValueError) as e:
        _core.check_json_schema(json.dumps(schema))
    msg = str(e.value)
    assert msg.startswith("response_format: json_schema at " + pointer + ":"), msg
    assert keyword in msg
