"""JSON mode's and structured outputs' per-step mask beside a plain pass over the logits row.

The mask (src/engine/json_constraint.h) walks the vocabulary's byte trie from a sample's recognizer state; a step of
JSON mode / json_schema costs that walk plus the pass that sets the refused logits to -inf (mask_row), which is
also the least any mask costs. Each row times the mask over the recognizer states at every byte of one document
(so states inside strings, numbers, keys, enum values and between tokens all count) and, in alternating rounds,
the plain pass over a row of V logits as many times: ratio = mask time / pass time, per state. The vocabulary is
a synthetic byte-level one of 49152 tokens (SmolLM2's size), drawn from a fixed seed: words with and without a
leading space, digits, punctuation runs, JSON pieces and multi-byte characters, as a BPE vocabulary holds them.
"""
import json
import random

import numpy as np

from .. import _core
from .harness import round_time

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["quick", "brown", "lazy"]}, "maxItems": 4},
    "bio": {"type": "string", "maxLength": 40},
    "pet": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/pet"}]}},
    "required": ["name", "age"],
    "$defs": {"pet": {"type": "object", "properties": {"kind": {"enum": ["fox", "dog"]}}, "required": ["kind"]}}}
DOC = {"name": "The quick brown fox, \u00e9t\u00e9 2024", "age": 31, "tags": ["quick", "lazy"],
       "bio": "jumps over the lazy dog", "pet": {"kind": "fox"}}

# What pydantic writes for bounds, formats, patterns and tuples: numbers and formatted / patterned strings are
# walked byte by byte (no string-plain shortcut inside them).
TYPED_SCHEMA = {"type": "object", "properties": {
    "id": {"type": "string", "format": "uuid"},
    "at": {"type": "string", "format": "date-time"},
    "host": {"type": "string", "format": "ipv4"},
    "sku": {"type": "string", "pattern": "^[A-Z]{3}-\\d{4}$"},
    "count": {"type": "integer", "minimum": 1, "maximum": 1000},
    "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 100},
    "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2,
             "maxItems": 2}},
    "required": ["id", "at", "host", "sku", "count", "score", "pair"]}
TYPED_DOC = {"id": "123e4567-e89b-12d3-a456-426614174000", "at": "2024-02-29T23:59:01.25Z", "host": "10.0.0.255",
             "sku": "FOX-2024", "count": 731, "score": 99.125, "pair": [3, "fox"]}

# What pydantic writes for extra="allow" with typed extras, a constr with a pattern and lengths, and a decimal
# multiple_of: unlisted keys are walked byte by byte (no string-plain shortcut: each is checked against the listed
# keys), and so is the patterned string (its lengths intersect the DFA).
OPEN_SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "pattern": "^[A-Za-z ]+$", "minLength": 3, "maxLength": 24},
    "price": {"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 1000}},
    "required": ["name"], "additionalProperties": {"type": "integer"}, "maxProperties": 6}
OPEN_DOC = {"name": "Quick brown fox", "price": 12.5, "legs": 4, "weight_kg": 21, "\u00e9t\u00e9": 2024}

CASES = (
    ("json_object", "", json.dumps(DOC)),
    ("json_schema", json.dumps(SCHEMA), json.dumps(DOC)),
    ("json_schema_typed", json.dumps(TYPED_SCHEMA), json.dumps(TYPED_DOC)),
    ("json_schema_open", json.dumps(OPEN_SCHEMA), json.dumps(OPEN_DOC, ensure_ascii=False)),
)
# The open case again with its patterned string's trie walked whole, as before the per-DFA-state token sets
# (src/engine/json_pattern_tokens.h): the two rows' ratios side by side are what the sets save.
WALK_CASES = (("json_schema_open_walk",) + CASES[-1][1:],)
# patternProperties / propertyNames: keys off the listed keys' trie move one key DFA (src/engine/json_schema_keys.h),
# whose quote-free tokens come from the same per-state sets as a patterned string's.
KEYS_SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
               "patternProperties": {"^x_[a-z_]+$": {"type": "string"}, "^[A-Z][a-z]+$": {"type": "integer"}},
               "propertyNames": {"maxLength": 24}, "additionalProperties": False}
KEYS_DOC = {"id": 7, "x_trace_id": "abc", "Population": 5, "Area": 7}
KEYS_CASES = (("json_schema_keys", json.dumps(KEYS_SCHEMA), json.dumps(KEYS_DOC)),)


def synthetic_vocabulary(size, seed=0):
    rng = random.Random(seed)
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    pieces = ['{"', '"}', '":', '": "', '",', '", "', "},", "}]", "[{", "\\n", "\\u00", "\\\"", "  ", "\n", "\n  ",
              "\t", ", ", ": ", "true", "false", "null"]
    out = {bytes([b]) for b in range(256)}
    while len(out) < size:
        kind = rng.random()
        if kind < 0.6:
            word = "".join(rng.choice(letters[:rng.randint(5, 26)]) for _ in range(rng.randint(1, 9)))
            word = (" " if rng.random() < 0.5 else "") + (word.capitalize() if rng.random() < 0.2 else word)
        elif kind < 0.7:
            word = str(rng.randint(0, 999))
        elif kind < 0.8:
            word = "".join(rng.choice(".,;:!?-_()[]{}<>\"'/\\*#=+") for _ in range(rng.randint(1, 4)))
        elif kind < 0.9:
            word = rng.choice(pieces) + rng.choice(["", rng.choice(letters)])
        else:
            chars = [0xe9, 0xfc, 0x4e2d, 0x6587, 0x0436, 0x1F600]
            word = "".join(chr(rng.choice(chars)) for _ in range(rng.randint(1, 2)))
        out.add(word.encode())
    return sorted(out)[:size]


def _rounds(scale):
    return {"full": 9, "quick": 5}.get(scale, 2)


def run_json_mask(scale, timing, progress=lambda s: None):
    """{"vocab", "rounds", "rows": [one per case]}: each row's mask and plain-pass time per state (ms) and their
    ratio (the median of the rounds' mask / pass)."""
    size = 4096 if scale == "tiny" else 49152
    bench = _core.JsonMaskBench(synthetic_vocabulary(size))
    rounds = _rounds(scale)
    rows = []
    for name, schema, doc in CASES + WALK_CASES + KEYS_CASES:
        progress(f"timing the {name} mask over a {size}-token vocabulary")
        bench.use_pattern_sets(not name.endswith("_walk"))
        states = bench.prepare(schema, doc.encode())
        allowed = bench.mask() / states
        times = {"mask": [], "read": []}
        for r in range(rounds):
            for form in (("mask", "read") if r % 2 == 0 else ("read", "mask")):
                times[form].append(round_time(getattr(bench, form), timing, rounds) / states)
        ratios = [m / p for m, p in zip(times["mask"], times["read"])]
        rows.append({"format": name, "states": states, "allowed_mean": allowed,
                     "mask_ms": float(np.median(times["mask"])) * 1e3,
                     "read_ms": float(np.median(times["read"])) * 1e3, "ratio": float(np.median(ratios))})
    return {"vocab": size, "string_plain_tokens": bench.string_plain_tokens, "rounds": rounds, "rows": rows}


def format_json_mask(doc):
    lines = ["", f"JSON mode / structured outputs mask, per recognizer state (every byte of one document), synthetic "
                 f"{doc['vocab']}-token vocabulary ({doc['string_plain_tokens']} take a free string as they are), "
                 f"median of {doc['rounds']} alternating rounds:"]
    header = ("format", "states", "allowed", "mask ms", "row pass ms", "mask / pass")
    table = [header] + [(r["format"], str(r["states"]), f"{r['allowed_mean']:.0f}", f"{r['mask_ms']:.4f}",
                         f"{r['read_ms']:.4f}", f"{r['ratio']:.1f}") for r in doc["rows"]]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        lines.append("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                                      enumerate(zip(row, widths))))
    return lines
