"""Structured outputs' numeric bounds (src/engine/json_number_bounds.h): minimum / maximum / exclusive* / multipleOf
enforced while a number is written, checked against references written here from the definitions:
- exhaustively over small ranges: the set of valid texts is enumerated with Python's int / fractions.Fraction, and
  every prefix of them (and every one-byte extension of those) is accepted iff some valid text starts with it;
  the recognizer may end exactly on the valid texts;
- int64 edges, exclusive edges, negative ranges, ranges holding no value (refused at compile time, by name);
- random walks through the recognizer end in documents pydantic (an independent validator) accepts, for schemas
  that pydantic's model_json_schema() writes."""
import itertools
import json
from fractions import Fraction

import pytest

from attnzoo import _core
from test_json_schema import walks

NUMBER_BYTES = b"-0123456789.eE+"


def prefix_state(schema, text):
    return _core.json_schema_prefix(json.dumps(schema), text.encode())


def check_exhaustively(schema, valid_texts, prefix_ok):
    """Every prefix of a valid text and its one-byte extensions: accepted iff a prefix of a valid text (where
    prefix_ok(text) says the enumeration is complete enough to tell), may end iff valid."""
    valid = set(valid_texts)
    prefixes = {t[:k] for t in valid for k in range(len(t) + 1)}
    probes = {p + chr(b) for p in prefixes for b in NUMBER_BYTES} | prefixes
    text_schema = json.dumps(schema)
    checked = 0
    for t in sorted(probes):
        if not prefix_ok(t):
            continue
        n, complete, can_end = _core.json_schema_prefix(text_schema, t.encode())
        whole = n == len(t)
        assert whole == (t in prefixes), f"{schema}: {t!r} {'accepted' if whole else 'refused at ' + str(n)}"
        if whole:
            assert can_end == (t in valid), f"{schema}: may end at {t!r}: {can_end}"
        checked += 1
    return checked


INTEGER_RANGES = [
    {"minimum": -137, "maximum": 2045},
    {"exclusiveMinimum": -20, "exclusiveMaximum": 31, "multipleOf": 3},
    {"minimum": 17, "maximum": 17},
    {"minimum": -1000, "maximum": -37},
    {"minimum": 995, "maximum": 1004},
    {"minimum": 0, "maximum": 9, "multipleOf": 10},
    {"minimum": -0.5, "exclusiveMaximum": 12.5},
    {"minimum": 1, "maximum": 300, "multipleOf": 25},
]


@pytest.mark.parametrize("bounds", INTEGER_RANGES, ids=lambda b: json.dumps(b))
def test_integer_ranges_exhaustively(bounds):
    import math
    lo = max(math.ceil(bounds.get("minimum", -10 ** 6)), math.floor(bounds.get("exclusiveMinimum", -10 ** 6)) + 1)
    hi = min(math.floor(bounds.get("maximum", 10 ** 6)), math.ceil(bounds.get("exclusiveMaximum", 10 ** 6)) - 1)
    step = bounds.get("multipleOf", 1)
    values = [v for v in range(lo, hi + 1) if v % step == 0]
    texts = [str(v) for v in values] + (["-0"] if 0 in values else [])
    checked = check_exhaustively({"type": "integer", **bounds}, texts, lambda t: True)
    assert checked > len(texts)


NUMBER_RANGES = [
    {"minimum": -12.5, "exclusiveMaximum": 27.25},
    {"exclusiveMinimum": 0, "maximum": 1},
    {"minimum": 0.1, "maximum": 0.3},
    {"exclusiveMinimum": -3, "exclusiveMaximum": -2.99},
    {"minimum": -0.75, "maximum": 0},
    {"minimum": 19.99, "maximum": 20.01},
]


def number_texts(limit_int=40, decimals=3):
    for sign, whole in itertools.product(["", "-"], range(limit_int)):
        yield f"{sign}{whole}"
        for d in range(1, decimals + 1):
            for frac in range(10 ** d):
                yield f"{sign}{whole}.{frac:0{d}d}"


def in_number_range(text, b):
    v = Fraction(text)
    f = lambda k: Fraction(repr(b[k]))  # noqa: E731 (the bound's shortest decimal, as the schema spells it)
    return (("minimum" not in b or v >= f("minimum")) and ("maximum" not in b or v <= f("maximum")) and
            ("exclusiveMinimum" not in b or v > f("exclusiveMinimum")) and
            ("exclusiveMaximum" not in b or v < f("exclusiveMaximum")))


@pytest.mark.parametrize("bounds", NUMBER_RANGES, ids=lambda b: json.dumps(b))
def test_number_ranges_exhaustively(bounds):
    valid = [t for t in number_texts() if in_number_range(t, bounds)]

    # A prefix with at most 2 decimals and a 1-2 digit integer part has a witness among the enumerated texts
    # (integer parts below 40, 3 decimals) whenever it has one at all: the bounds have at most 2 decimals and lie
    # within +-30. Longer prefixes are past what the enumeration can tell.
    def complete_enough(t):
        whole, _, frac = t.lstrip("-").partition(".")
        return len(frac) <= 2 and len(whole) <= 2 and "e" not in t.lower() and "+" not in t

    checked = check_exhaustively({"type": "number", **bounds}, valid, complete_enough)
    assert checked > 50


DECIMAL_MULTIPLES = [
    {"minimum": -3, "maximum": 7.5, "multipleOf": 0.25},
    {"exclusiveMinimum": 0, "exclusiveMaximum": 12.5, "multipleOf": 2.5},
    {"minimum": 0.1, "maximum": 0.3, "multipleOf": 0.01},
    {"minimum": 1.05, "maximum": 3, "multipleOf": 0.1},
    {"minimum": -30, "maximum": 30, "multipleOf": 0.3},
    {"exclusiveMinimum": -1, "maximum": 0, "multipleOf": 0.05},
]


@pytest.mark.parametrize("bounds", DECIMAL_MULTIPLES, ids=lambda b: json.dumps(b))
def test_decimal_multiples_exhaustively(bounds):
    """A value is a multiple when its decimal text over the step's shortest decimal is whole (Fraction, not floats:
    0.3 / 0.1 is 2.9999999999999996 in doubles)."""
    step = Fraction(repr(bounds["multipleOf"]))
    valid = [t for t in number_texts() if in_number_range(t, bounds) and (Fraction(t) / step).denominator == 1]

    def complete_enough(t):
        whole, _, frac = t.lstrip("-").partition(".")
        return len(frac) <= 2 and len(whole) <= 2 and "e" not in t.lower() and "+" not in t

    checked = check_exhaustively({"type": "number", **bounds}, valid, complete_enough)
    assert checked > 50


def test_decimal_steps_on_integers_and_unbounded():
    ints = [str(v) for v in range(-40, 40)]
    for step, keep in [(2.5, 5), (0.5, 1), (0.2, 1), (1.5, 3)]:
        valid = [t for t in ints if int(t) % keep == 0 and -30 <= int(t) <= 30] + ["-0"]
        check_exhaustively({"type": "integer", "minimum": -30, "maximum": 30, "multipleOf": step}, valid,
                           lambda t: True)
    for text, n, end in [("0.3", 3, True), ("0.35", 3, True), ("-1234567.80", 11, True), ("1e1", 1, True)]:
        assert prefix_state({"type": "number", "multipleOf": 0.1}, text)[0::2] == (n, end), text


def test_unbounded_sides_reach_the_digit_bound():
    """An unbounded side reaches as far as any number goes: 20 integer digits (every number is a finite double)."""
    for schema, text in [({"type": "number", "minimum": 5}, "12345678901234567890.5"),
                         ({"type": "number", "exclusiveMaximum": -7.5}, "-99999999999999999999"),
                         ({"type": "integer", "minimum": -3}, "9223372036854775807")]:
        n, complete, can_end = prefix_state(schema, text)
        assert n == len(text) and can_end, (schema, text)
        if schema["type"] == "number":  # (a bounded integer stays within int64, tested below)
            sign = "-" if text.startswith("-") else ""
            assert prefix_state(schema, sign + "9" * 21)[0] == len(sign) + 20, schema  # the 21st digit is refused


INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


@pytest.mark.parametrize("schema,text,accepted_bytes,can_end", [
    ({"type": "integer", "minimum": INT64_MIN, "maximum": INT64_MAX}, str(INT64_MAX), 19, True),
    ({"type": "integer", "minimum": INT64_MIN, "maximum": INT64_MAX}, str(INT64_MAX + 1), 18, True),
    ({"type": "integer", "minimum": INT64_MIN, "maximum": INT64_MAX}, str(INT64_MIN), 20, True),
    ({"type": "integer", "minimum": INT64_MIN, "maximum": INT64_MAX}, str(INT64_MIN - 1), 19, True),
    ({"type": "integer", "minimum": 0}, str(INT64_MAX + 1), 18, True),  # a bounded integer stays in int64
    ({"type": "integer", "minimum": INT64_MAX - 5}, str(INT64_MAX - 6), 18, False),
    ({"type": "integer", "minimum": INT64_MAX - 5}, "8", 0, False),
    ({"type": "integer", "exclusiveMaximum": 0}, "0", 0, False),
    ({"type": "integer", "exclusiveMaximum": 0}, "-0", 1, False),
    ({"type": "integer", "exclusiveMaximum": 0}, "-1", 2, True),
    ({"type": "integer", "exclusiveMinimum": 0}, "-", 0, False),
    ({"type": "number", "exclusiveMinimum": 0}, "0.000", 5, False),
    ({"type": "number", "exclusiveMinimum": 0}, "0.0001", 6, True),
    ({"type": "number", "exclusiveMinimum": 0}, "1e5", 1, True),  # no exponent beside bounds
    ({"type": "number", "maximum": 0.1}, "0.1000000000000000000001", 23, True),
    ({"type": "number", "maximum": 0.1}, "0.10000", 7, True),
    ({"type": "number", "maximum": -0.0}, "-0.0", 4, True),
    ({"type": "number", "maximum": -0.0}, "0.01", 3, True),
])
def test_edges(schema, text, accepted_bytes, can_end):
    """How many bytes of `text` are accepted, and whether the document may end after them."""
    n, complete, end = prefix_state(schema, text)
    assert (n, end) == (accepted_bytes, can_end), (schema, text, n, end)


def test_a_top_level_bounded_integer_is_complete_when_no_digit_fits():
    assert prefix_state({"type": "integer", "minimum": 0, "maximum": 12}, "12")[1:] == (True, True)
    assert prefix_state({"type": "integer", "minimum": 0, "maximum": 12}, "1")[1:] == (False, True)
    assert prefix_state({"type": "number", "minimum": 0, "maximum": 12}, "12")[1:] == (False, True)  # "12.0"


@pytest.mark.parametrize("schema,where,words", [
    ({"type": "integer", "minimum": 3, "maximum": 2}, "#", "no integer lies in [3, 2]"),
    ({"type": "integer", "exclusiveMinimum": 2, "exclusiveMaximum": 3}, "#", "no integer lies"),
    ({"type": "integer", "minimum": 1, "maximum": 9, "multipleOf": 10}, "#", "no integer multiple of 10"),
    ({"type": "integer", "minimum": 0.2, "maximum": 0.8}, "#", "no integer lies"),
    ({"type": "number", "exclusiveMinimum": 1, "maximum": 1}, "#", "no number lies"),
    ({"properties": {"x": {"type": "number", "multipleOf": 0.5, "minimum": 1.1, "maximum": 1.4}}},
     "#/properties/x", "no multiple of 0.5 lies"),
    ({"type": "integer", "multipleOf": 0}, "#/multipleOf", "positive number"),
    ({"type": "number", "multipleOf": 1e-13}, "#/multipleOf", "more than 12 decimals"),
    ({"type": "integer", "minimum": True}, "#/minimum", "minimum must be a number"),
    ({"type": "number", "maximum": 1e-13}, "#/maximum", "more than 12 decimals"),
    ({"type": "number", "maximum": 1e20}, "#/maximum", "below 1e18"),
])
def test_empty_or_unsupported_ranges_are_refused_by_name(schema, where, words):
    with pytest.raises(ValueError) as e:
        _core.check_json_schema(json.dumps(schema))
    msg = str(e.value)
    assert msg.startswith(f"response_format: json_schema at {where}:") and words in msg, msg


def test_bounds_apply_to_the_numeric_branch_of_a_type_list():
    schema = {"type": ["integer", "null", "string"], "minimum": 10, "maxLength": 2}
    assert prefix_state(schema, "9")[0] == 1 and prefix_state(schema, "9")[2] is False
    assert prefix_state(schema, "10")[2] and prefix_state(schema, "null")[2] and prefix_state(schema, '"ab"')[2]


def test_pydantic_models_end_to_end():
    pydantic = pytest.importorskip("pydantic")
    from pydantic import BaseModel, Field, conint

    class Reading(BaseModel):
        count: conint(ge=0)
        score: float = Field(gt=0, le=100)
        offset: int = Field(ge=-40, lt=-3)
        step: int = Field(multiple_of=5, ge=-20, le=20)
        ratio: float = Field(ge=-0.5, le=0.25)

    schema = Reading.model_json_schema()
    text = json.dumps(schema)
    for doc in walks(text, 7, 60, 30):
        Reading.model_validate_json(doc)  # raises on anything out of range
        value = json.loads(doc)
        assert value["step"] % 5 == 0 and -40 <= value["offset"] < -3
    with pytest.raises(pydantic.ValidationError):
        Reading.model_validate_json('{"count":0,"score":0,"offset":-4,"step":5,"ratio":0}')
    assert prefix_state(schema, '{"count":0,"score":0')[0] == len('{"count":0,"score":0')  # "0.5" may follow
    assert not prefix_state(schema, '{"count":0,"score":0,')[0] == len('{"count":0,"score":0,')
