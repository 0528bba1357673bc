"""Structured outputs' `pattern` (src/engine/json_string_pattern.h) against Python's re as the reference:
- exhaustively over a small alphabet: every string up to a length closes iff re.search matches it, and a prefix
  is taken iff some enumerated string that starts with it matches (the alphabets hold a character of every class
  the pattern uses, and the enumeration reaches past the longest completion a prefix needs);
- random walks through the recognizer end in strings re.search matches (Python's \\d \\w . are wider than the
  subset's ASCII meanings, so every string the subset writes matches them too);
- constructs outside the subset are refused by name, with the character where they stand."""
import itertools
import json
import re

import pytest

from attnzoo import _core
from test_json_schema import walks

# pattern, alphabet, longest string enumerated, longest completion a prefix may need
EXHAUSTIVE = [
    (r"^\d{3}-\d{2}$", "09-x", 7, 6),
    (r"^(cat|dog)s?$", "cadogts", 5, 4),
    (r"^(ab|a)*c?$", "abc", 7, 1),
    (r"b[^b]{2}b", "ab\u00e9", 7, 4),
    (r"^a{2,3}(-b)?$", "ab-", 6, 5),
    (r"^[a-c]+\.[a-c]{1,2}$", "ac.", 6, 3),
    (r"^(?:x|yz)+$", "xyz", 6, 1),
    (r"\u4e2d$", "a\u4e2d", 4, 1),  # the regex's own \u escape
    ("^\u00e9?b+$", "\u00e9b", 4, 1),  # the character itself
    (r"^a|b", "abx", 5, 1),  # an anchor binds to its top-level branch: (^a)|(b)
    (r"a|b$", "abx", 5, 1),
    (r"^ab|ba$", "abx", 6, 2),
]


def taken(pattern, s, close=False):
    text = json.dumps(s, ensure_ascii=False)
    if not close:
        text = text[:-1]
    n, complete, can_end = _core.json_schema_prefix(json.dumps({"type": "string", "pattern": pattern}),
                                                    text.encode())
    return n == len(text.encode()) and (can_end if close else True)


@pytest.mark.parametrize("pattern,alphabet,longest,reach", EXHAUSTIVE, ids=[e[0] for e in EXHAUSTIVE])
def test_small_alphabets_exhaustively(pattern, alphabet, longest, reach):
    strings = ["".join(t) for n in range(longest + 1) for t in itertools.product(alphabet, repeat=n)]
    matching = [s for s in strings if re.search(pattern, s)]
    assert matching
    prefixes = {m[:k] for m in matching for k in range(len(m) + 1)}
    checked = 0
    for s in strings:
        assert taken(pattern, s, close=True) == bool(re.search(pattern, s)), (pattern, s)
        if len(s) <= longest - reach:
            assert taken(pattern, s) == (s in prefixes), (pattern, s)
            checked += 1
    assert checked > 3


WALKED = [r"^\d{3}-\d{4}$", r"^[A-Z][a-z]{1,8}( [A-Z][a-z]{1,8})?$", r"^(cat|dog|bird)s?$", r"^ab+c",
          r"^[^aeiou\s]{2,5}$", r"^\w+@\w+\.(com|org)$", r"^.{1,3}$", r"^(?:[0-9a-f]{2}:){2}[0-9a-f]{2}$",
          r"\D\W\S", r"^\u00e9+\u4e2d?$", r"^a{0,2}b*?$", r"^[\w.-]+$", r"x|y|z"]


@pytest.mark.parametrize("pattern", WALKED)
def test_random_walks_end_in_matching_strings(pattern):
    schema = json.dumps({"type": "array", "items": {"type": "string", "pattern": pattern}, "minItems": 1,
                         "maxItems": 3})
    for doc in walks(schema, pattern, 50, 25, limit=600):
        for value in json.loads(doc):
            assert re.search(pattern, value), (pattern, value)
            assert not any(c in value for c in '"\\') and all(ord(c) >= 0x20 for c in value), value


@pytest.mark.parametrize("pattern,words", [
    (r"(?=a)b", "lookarounds"),
    (r"(a)\1", r"the escape \1"),
    (r"\bword", r"the escape \b"),
    (r"\p{L}", r"the escape \p"),
    (r"a{3,2}", "n < m"),
    (r"*a", "nothing to repeat"),
    (r"(ab", "unclosed '('"),
    (r"[ab", "unclosed '['"),
    (r"a^b", "anchor inside"),
    ("[\u00e9]", "non-ASCII character in a class"),
    (r"\ud800", "surrogate"),
    ('^"$', "matches no string written without escapes"),
    (r"^\n$", "matches no string written without escapes"),
    ("(" * 65 + ")" * 65, "nested more than 64 deep"),
    ("(a|b)*a(a|b){12}$", "more than 2048 DFA states"),
    ("(?:a{1000}){1000}", "too large"),  # the NFA's cap (16 * 2048 states), before any DFA state
])
def test_outside_the_subset_is_refused_by_name(pattern, words):
    with pytest.raises(ValueError) as e:
        _core.check_json_schema(json.dumps({"properties": {"p": {"type": "string", "pattern": pattern}}}))
    msg = str(e.value)
    assert msg.startswith("response_format: json_schema at #/properties/p/pattern:") and words in msg, msg


def test_a_schema_of_many_large_patterns_is_refused():
    big = r"^(a|b)*a(a|b){9}$"  # about 2^10 DFA states
    _core.check_json_schema(json.dumps({"type": "string", "pattern": big}))
    schema = {"type": "array", "prefixItems": [{"type": "string", "pattern": "^" + "x" * i + big[1:]} for i in range(20)]}
    with pytest.raises(ValueError, match=r"#/prefixItems/\d+/pattern: the schema's patterns need more than 16384"):
        _core.check_json_schema(json.dumps(schema))


def test_pattern_beside_format_is_refused():
    # (minLength / maxLength beside a pattern intersect it: test_json_schema_keywords.py.)
    with pytest.raises(ValueError, match="#: pattern beside format is not supported"):
        _core.check_json_schema(json.dumps({"type": "string", "pattern": "a", "format": "uuid"}))


def test_pydantic_constr_pattern_end_to_end():
    pytest.importorskip("pydantic")
    from pydantic import BaseModel, constr

    class Part(BaseModel):
        sku: constr(pattern=r"^[A-Z]{3}-\d{4}$")
        color: constr(pattern=r"^#[0-9a-fA-F]{6}$")

    for doc in walks(json.dumps(Part.model_json_schema()), 1, 30, 15):
        Part.model_validate_json(doc)
