"""Structured outputs' patternProperties and propertyNames (src/engine/json_schema_keys.h) against a plain Python
restatement of JSON Schema's rule, with Python's re deciding the regexes and len the lengths:
- every object of up to two members over small key / value sets is accepted whole iff the restatement accepts it;
- random walks through the mask (no accepted prefix is a dead end: the walk asserts a next byte exists) end in
  documents the restatement accepts, and cover keys of each pattern;
- overlapping patterns and a listed name a pattern matches are refused by name (both schemas would apply)."""
import itertools
import json
import random
import re

import pytest

from attnzoo import _core


def key_value_schema(schema, key):
    """The one schema a key's value takes under the subset's rule (None: the key is refused), or "listed"."""
    names = schema.get("propertyNames", {})
    if "maxLength" in names and len(key) > names["maxLength"]:
        return None
    if "minLength" in names and len(key) < names["minLength"]:
        return None
    if "pattern" in names and not re.search(names["pattern"], key):
        return None
    if "enum" in names and key not in names["enum"]:
        return None
    matched = [s for p, s in schema.get("patternProperties", {}).items() if re.search(p, key)]
    assert len(matched) <= 1, "the test's schemas keep patterns disjoint"
    if key in schema.get("properties", {}):
        return "listed"
    if matched:
        return matched[0]
    extra = schema.get("additionalProperties", "properties" not in schema)
    return None if extra is False else ({} if extra is True else extra)


def value_ok(sub, v):
    t = sub.get("type")
    return (t is None or (t == "integer" and type(v) is int) or (t == "boolean" and type(v) is bool)
            or (t == "null" and v is None) or (t == "string" and type(v) is str))


def reference(schema, text):
    """JSON Schema's rule as the subset reads it: listed keys once, in order, required ones present; others take
    the pattern that matches them or additionalProperties; each key within propertyNames."""
    pairs = json.loads(text, object_pairs_hook=lambda p: p)
    listed = list(schema.get("properties", {}))
    at = 0
    for k, v in pairs:
        sub = key_value_schema(schema, k)
        if sub is None:
            return False
        if sub == "listed":
            if listed.index(k) < at:
                return False
            at = listed.index(k) + 1
            sub = schema["properties"][k]
        if not value_ok(sub, v):
            return False
    keys = [k for k, _ in pairs]
    return (all(r in keys for r in schema.get("required", []))
            and schema.get("minProperties", 0) <= len(keys) <= schema.get("maxProperties", 99))


SCHEMAS = [
    ({"type": "object", "patternProperties": {"^a[0-9]*$": {"type": "integer"}, "^b": {"type": "boolean"}},
      "additionalProperties": {"type": "null"}, "propertyNames": {"maxLength": 3}},
     ["a", "a1", "a12", "ab", "b", "bcd", "bcde", "c", "", "\u00e9b", "a1b"], [1, True, None]),
    ({"type": "object", "patternProperties": {"^S_": {"type": "string"}, "^I_": {"type": "integer"}},
      "additionalProperties": False},
     ["S_a", "I_1", "S_", "I", "x", "s_a", "I_S_"], [1, "v", True]),
    ({"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}, "required": ["id"],
      "patternProperties": {"^x-": {"type": "string"}}},
     ["id", "name", "x-a", "x-", "idx", "x", "nam"], [1, "v"]),
    ({"type": "object", "properties": {"id": {"type": "integer"}}, "patternProperties": {"^n[0-9]+$": {"type": "integer"}},
      "additionalProperties": {"type": "boolean"}, "propertyNames": {"pattern": "^[a-z0-9]+$", "minLength": 2}},
     ["id", "n1", "n12", "n", "ab", "i", "AB", "n1a"], [1, True]),
    ({"type": "object", "propertyNames": {"enum": ["a", "b.c", "\u00e9t\u00e9"]}, "additionalProperties": {"type": "integer"},
      "maxProperties": 2},
     ["a", "b.c", "bxc", "b", "\u00e9t\u00e9", "\u00e9"], [1, True]),
    # The pattern's second branch is unanchored: "xI_" is its key, not additionalProperties'.
    ({"type": "object", "patternProperties": {"^S_|I_": {"type": "integer"}},
      "additionalProperties": {"type": "string"}},
     ["xI_", "S_a", "xS_", "I_", "q", "S_I_"], [1, "v"]),
    # propertyNames leaves additionalProperties no key: minProperties counts the listed ones only ("c" first is a
    # dead end).
    ({"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "additionalProperties": True,
      "propertyNames": {"enum": ["a", "b", "c"]}, "minProperties": 2},
     ["a", "b", "c", "d"], [1, True]),
]


@pytest.mark.parametrize("case", range(len(SCHEMAS)))
def test_objects_of_two_members_are_accepted_iff_the_reference_accepts_them(case):
    schema, keys, values = SCHEMAS[case]
    text = json.dumps(schema)
    members = [(k, v) for k in keys for v in values]
    accepted = 0
    for n in range(3):
        for combo in itertools.product(members, repeat=n):
            doc = "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + json.dumps(v) for k, v in combo) + "}"
            raw = doc.encode()
            taken, complete, _ = _core.json_schema_prefix(text, raw)
            want = reference(schema, doc)
            assert (taken == len(raw) and complete) == want, (schema, doc, taken)
            accepted += want
    assert accepted >= 5  # the reference is not vacuous


@pytest.mark.parametrize("case", range(len(SCHEMAS)))
def test_random_walks_end_in_documents_the_reference_accepts(case):
    schema, keys, _ = SCHEMAS[case]
    text = json.dumps(schema)
    rng = random.Random(case)
    seen = set()
    done = 0
    for _ in range(120):
        doc = b""
        while len(doc) < 300:
            nxt, complete, _ = _core.json_schema_next_bytes(text, doc)
            if complete:
                break
            assert nxt, f"dead end after {doc!r}"
            if ord('"') in nxt and doc.rstrip()[-1:] in (b"{", b",") and rng.random() < 0.5:
                key = json.dumps(rng.choice(keys), ensure_ascii=False).encode()
                if _core.json_schema_prefix(text, doc + key)[0] == len(doc + key):
                    doc += key
                    continue
            closers = [b for b in nxt if b in b'"}]']
            doc += bytes([rng.choice(closers) if closers and rng.random() < min(0.9, len(doc) / 40)
                          else rng.choice(nxt)])
        else:
            continue
        assert reference(schema, doc.decode()), (schema, doc)
        seen.update(json.loads(doc))
        done += 1
    assert done >= 40
    for p in schema.get("patternProperties", {}):
        assert any(re.search(p, k) for k in seen), (p, seen)


def test_listed_names_and_patterns_that_overlap_are_refused():
    for schema, words in [
        ({"properties": {"x-id": {}}, "patternProperties": {"^x-": {}}}, ("#/properties/x-id:", "also matches")),
        ({"patternProperties": {"[0-9]": {}, "^a": {}}}, ("#/patternProperties:", "both match")),
        ({"propertyNames": {"maxLength": 2}, "properties": {"abc": {}}}, ("#/properties/abc:", "propertyNames")),
        ({"propertyNames": {"pattern": "^[a-z]+$"}, "patternProperties": {"^[0-9]+$": {}},
          "additionalProperties": False}, ("#/patternProperties:", "no key")),
    ]:
        with pytest.raises(ValueError) as e:
            _core.check_json_schema(json.dumps(schema))
        assert all(w in str(e.value) for w in words), str(e.value)
    # Disjoint once propertyNames is applied: "^a" and "b$" can only meet on keys longer than propertyNames allows.
    _core.check_json_schema(json.dumps({"patternProperties": {"^a.b$": {}, "^x": {}}, "propertyNames": {"maxLength": 3}}))


def test_other_keys_take_escapes_as_json_dumps_writes_them():
    """Unlisted keys beside properties: a key text is accepted iff Python's json reads it as a string that
    json.dumps(ensure_ascii=False) writes back as the same text, and that string is not "a", the listed key already
    written (listed keys once each; "q\"" after "a" is the listed key in its place)."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "q\"": {"type": "integer"}},
              "additionalProperties": {"type": "integer"}}
    text = json.dumps(schema)
    pieces = ["a", "q", "\\\"", "\\\\", "\\n", "\\t", "\\/", "\\u0061", "\\u0001", "\\u001F", "\\u001f", "\\u000a",
              "\\u00e9", "\u00e9", "\\b", "\\x"]
    checked = accepted = 0
    for n in range(1, 3):
        for combo in itertools.product(pieces, repeat=n):
            key = '"' + "".join(combo) + '"'
            doc = '{"a":1,' + key + ":2}"
            try:
                value = json.loads(key)
                want = json.dumps(value, ensure_ascii=False) == key and value != "a"
            except ValueError:
                want = False
            taken, complete, _ = _core.json_schema_prefix(text, doc.encode())
            assert (taken == len(doc.encode()) and complete) == want, doc
            checked += 1
            accepted += want
    assert accepted > 50 and checked - accepted > 50
