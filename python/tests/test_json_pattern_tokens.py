"""Structured outputs' per-DFA-state token sets inside patterned / formatted strings
(src/engine/json_pattern_tokens.h) over SmolLM2's real 49,152-token vocabulary:
- at every byte of documents with broad classes, alternations, unanchored patterns and formats (with and without
  minLength / maxLength) the mask is the trie walk's, bit for bit (the walk is what the sets replace);
- inside `^[A-Za-z ]+$` with lengths 3-24, Python's re decides independently: a token without a quote is taken
  iff the string so far and the token are letters and spaces, 24 characters at most."""
import json
import os
import random
import re

import pytest

from attnzoo import _core
from attnzoo.bench.json_mask import OPEN_DOC, OPEN_SCHEMA, TYPED_DOC, TYPED_SCHEMA

SMOLLM2 = os.path.join(os.path.dirname(__file__), "..", "..", ".models", "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(scope="module")
def vocab():
    if not os.path.exists(SMOLLM2):
        pytest.skip("needs .models/SmolLM2-135M-Instruct.Q4_1.gguf")
    from attnzoo.tokenizer import Tokenizer
    tok = Tokenizer.load(SMOLLM2)
    token_bytes = _core.token_bytes_in_context(tok._native, tok.vocab_size)
    return token_bytes, _core.JsonMaskBench(token_bytes)


def masks(bench, schema, doc, sets):
    bench.use_pattern_sets(sets)
    states = bench.prepare(json.dumps(schema), json.dumps(doc, ensure_ascii=False).encode())
    out = bench.masks()
    size = len(out) // states
    return [out[i * size:(i + 1) * size] for i in range(states)]


def string_schema(s):
    return {"type": "object", "properties": {"s": s, "n": {"type": "integer"}}, "required": ["s", "n"]}


rng = random.Random(3)
CASES = [
    (OPEN_SCHEMA, OPEN_DOC),
    (TYPED_SCHEMA, TYPED_DOC),
    (string_schema({"type": "string", "pattern": "^[A-Za-z ]+$"}), {"s": "The quick brown fox jumps", "n": 1}),
    (string_schema({"type": "string", "pattern": "^(cat|dog|bird)( (cat|dog|bird))*$", "maxLength": 20}),
     {"s": "dog cat bird", "n": 2}),
    (string_schema({"type": "string", "pattern": "[0-9]{3}", "minLength": 5}), {"s": "ab 123 \u00e9t\u00e9", "n": 3}),
    (string_schema({"type": "string", "format": "date"}), {"s": "2024-02-29", "n": 4}),
    (string_schema({"type": "string", "format": "duration"}), {"s": "P3Y6M4DT12H30M5S", "n": 5}),
    (string_schema({"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$", "minLength": 2, "maxLength": 30}),
     {"s": "-".join("".join(rng.choice("abcxyz") for _ in range(rng.randint(1, 5))) for _ in range(4)), "n": 6}),
    # Keys under patternProperties / propertyNames: off the listed keys' trie a byte only moves the key DFA.
    ({"type": "object", "patternProperties": {"^[a-z_]+$": {"type": "integer"}, "^[A-Z]": {"type": "string"}},
      "propertyNames": {"maxLength": 24}, "additionalProperties": False},
     {"population_total": 5, "Capital": "Paris", "area": 7}),
    ({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
      "patternProperties": {"^x-[a-z]+$": {"type": "string"}}, "additionalProperties": {"type": "boolean"}},
     {"x-trace": "abc", "id": 3, "idea": True, "\u00e9t\u00e9": False}),
]


@pytest.mark.parametrize("schema,doc", CASES, ids=[json.dumps(c[0]["properties"]["s"])[:48] if "s" in
                                                   c[0].get("properties", {}) else str(i) for i, c in enumerate(CASES)])
def test_the_sets_mask_as_the_walk_does_at_every_byte(vocab, schema, doc):
    _, bench = vocab
    new, old = masks(bench, schema, doc, True), masks(bench, schema, doc, False)
    text = json.dumps(doc, ensure_ascii=False).encode()
    for i, (a, b) in enumerate(zip(new, old)):
        assert a == b, f"after {text[:i]!r}"


def test_a_broad_class_takes_what_re_takes(vocab):
    token_bytes, bench = vocab
    schema = string_schema({"type": "string", "pattern": "^[A-Za-z ]+$", "minLength": 3, "maxLength": 24})
    for value in ["Quick brown fox", "".join(rng.choice("AbZ y") for _ in range(24)), "a b"]:
        text = json.dumps({"s": value, "n": 1}).encode()
        new = masks(bench, schema, {"s": value, "n": 1}, True)
        start = text.index(b': "') + 3
        checked = 0
        for i in range(start, start + len(value.encode())):
            so_far = text[start:i]
            for t, allowed in zip(token_bytes, new[i]):
                if not t or b'"' in t:
                    continue
                want = re.fullmatch(rb"[A-Za-z ]*", so_far + t) is not None and len(so_far + t) <= 24
                assert bool(allowed) == want, (so_far, t)
                checked += want
        assert checked > 10000  # the broad class takes most of the vocabulary's words
