"""Structured outputs' string formats (src/engine/json_string_format.h) against independent references: Python's
datetime.date / time / datetime.fromisoformat, uuid.UUID and ipaddress.IPv4Address decide the values (each behind
a regular expression of the RFC 3339 / JSON Schema shape, since Python reads wider spellings too), and regular
expressions written here from the documented grammars decide email and duration.
- enumerations: every date of several years (month 00-13, day 00-32) and every prefix of the valid ones with each
  one-byte extension; octet combinations for ipv4; hours / minutes / seconds / fractions / offsets for times;
- random walks through the recognizer end in values the references accept, and never reach a dead end;
- unknown formats and format beside maxLength are refused by name."""
import datetime
import ipaddress
import itertools
import json
import random
import re
import uuid

import pytest

from attnzoo import _core
from test_json_schema import walks

# RFC 3339's offset is hours 00-23 and minutes 00-59 (Python reads "+12:60" too).
TIME_SHAPE = r"\d\d:\d\d:\d\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)"
EMAIL = re.compile(r"(?=[^@]{1,64}@)[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@"
                   r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}"
                   r"[A-Za-z0-9])?)+")
DURATION = re.compile(r"P((\d{1,9}D|\d{1,9}M(\d{1,9}D)?|\d{1,9}Y(\d{1,9}M(\d{1,9}D)?)?)(T(\d{1,9}H(\d{1,9}M"
                      r"(\d{1,9}S)?)?|\d{1,9}M(\d{1,9}S)?|\d{1,9}S))?|T(\d{1,9}H(\d{1,9}M(\d{1,9}S)?)?|\d{1,9}M"
                      r"(\d{1,9}S)?|\d{1,9}S)|\d{1,9}W)")


def parses(fn, text):
    try:
        fn(text)
        return True
    except ValueError:
        return False


REFERENCE = {
    "date": lambda t: re.fullmatch(r"\d{4}-\d\d-\d\d", t) and parses(datetime.date.fromisoformat, t),
    "time": lambda t: re.fullmatch(TIME_SHAPE, t) and parses(datetime.time.fromisoformat, t),
    "date-time": lambda t: re.fullmatch(r"\d{4}-\d\d-\d\dT" + TIME_SHAPE, t) and
    parses(datetime.datetime.fromisoformat, t),
    "uuid": lambda t: re.fullmatch(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", t) and parses(uuid.UUID, t),
    "ipv4": lambda t: parses(ipaddress.IPv4Address, t) and re.fullmatch(r"[0-9.]+", t),
    "email": lambda t: EMAIL.fullmatch(t),
    "duration": lambda t: DURATION.fullmatch(t),
}


def state(fmt, body):
    """The recognizer on the JSON string '"' + body (+ '"' when closed): bytes taken, may end."""
    n, complete, can_end = _core.json_schema_prefix(json.dumps({"type": "string", "format": fmt}),
                                                    ('"' + body).encode())
    return n - 1, can_end


def closes(fmt, body):
    n, end = state(fmt, body + '"')
    return n == len(body) + 1 and end


def check_exactly(fmt, candidates, extension_bytes, witness):
    """Each candidate closes iff the reference accepts it; every prefix of an accepted one is taken; and each one-byte
    extension of those prefixes is taken iff witness(extension) finds a valid value that starts with it (None: the
    witness cannot tell, the probe is skipped)."""
    valid = {c for c in candidates if REFERENCE[fmt](c)}
    assert valid, fmt
    for c in candidates:
        assert closes(fmt, c) == (c in valid), f"{fmt}: {c!r} closes: {c in valid} expected"
    prefixes = {v[:k] for v in valid for k in range(len(v) + 1)}
    for p in prefixes:
        assert state(fmt, p)[0] == len(p), f"{fmt}: {p!r}, a prefix of a valid value, refused"
    probes = 0
    for p in sorted({p + chr(b) for p in prefixes for b in extension_bytes}):
        expected = witness(p)
        if expected is None:
            continue
        taken = state(fmt, p)[0] == len(p)
        assert taken == expected, f"{fmt}: {p!r} taken: {taken}"
        probes += 1
    assert probes > 20


def by_suffixes(fmt, suffixes):
    """A witness: some suffix completes the prefix to a valid value (a 1-tuple is a template: its part past the
    prefix's length is the suffix)."""
    def witness(p):
        return any(REFERENCE[fmt](p + (s[0][len(p):] if isinstance(s, tuple) else s)) for s in suffixes)
    return witness


@pytest.mark.parametrize("year", [1, 1900, 2000, 2023, 2024, 9999])
def test_dates_of_a_year_exactly(year):
    candidates = [f"{year:04d}-{m:02d}-{d:02d}" for m in range(14) for d in range(33)]
    valid_prefixes = {c[:k] for c in candidates if REFERENCE["date"](c) for k in range(len(c) + 1)}
    # Past the year every valid date of the year is a candidate; within it, other years would be witnesses.
    check_exactly("date", candidates, b"0123456789-T", lambda p: p in valid_prefixes if len(p) > 4 else None)


def test_year_zero_and_short_dates_are_refused():
    assert state("date", "0000")[0] == 3 and state("date", "0001")[0] == 4
    assert not closes("date", "2024-1-01") and not closes("date", "2024-01-01T00:00:00Z")


def test_times_exactly():
    rng = random.Random(3)
    candidates = []
    for h, m, s in itertools.product([0, 9, 19, 23, 24], [0, 59, 60], [0, 30, 59, 60]):
        for frac in ["", ".5", ".123456", ".1234567", "."]:
            for zone in ["Z", "z", "+05:30", "-00:00", "+23:59", "+24:00", "-12:60", ""]:
                if rng.random() < 0.3:
                    candidates.append(f"{h:02d}:{m:02d}:{s:02d}{frac}{zone}")
    assert len(candidates) > 300
    for fmt, prefix in [("time", ""), ("date-time", "2024-02-29T")]:
        for c in candidates:
            assert closes(fmt, prefix + c) == bool(REFERENCE[fmt](prefix + c)), (fmt, prefix + c)
    check_exactly("time", candidates, b"0123456789:.Z+-",
                  by_suffixes("time", [("00:00:00Z",), ("00:00:00.0Z",), "Z", "0Z", "0", "00", ":00", "0:00", "00:00"]))


def test_uuids():
    rng = random.Random(5)
    good = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(20)]
    good += [g.upper() for g in good[:5]]
    bad = [g.replace("-", "") for g in good[:3]] + ["{" + good[0] + "}", good[1][:-1], good[2] + "0",
                                                     good[3][:9] + "g" + good[3][10:]]
    check_exactly("uuid", good + bad, b"0123456789abcdefABCDEFg-",
                  by_suffixes("uuid", [("0" * 8 + "-0000" * 3 + "-" + "0" * 12,)]))


def test_ipv4_exactly():
    parts = ["0", "1", "9", "10", "99", "100", "199", "249", "255", "256", "300", "00", "01", "001", "1000"]
    rng = random.Random(9)
    candidates = [".".join(rng.choice(parts) for _ in range(4)) for _ in range(400)]
    candidates += ["1.2.3", "1.2.3.4.5", "1..2.3", "255.255.255.255", "0.0.0.0"]
    check_exactly("ipv4", candidates, b"0123456789.",
                  by_suffixes("ipv4", [x + ".0" * k for x in ["", "0"] for k in range(4)]))


def test_emails():
    good = ["a@b.co", "first.last+tag@sub.example-host.org", "x!#$%&'*+/=?^_`{|}~-y@a1.b2", "a" * 64 + "@x.io",
            "u@" + ".".join(["l" * 63] * 3) + ".abcd"]
    bad = ["a@b", ".a@b.co", "a.@b.co", "a..b@c.de", "a" * 65 + "@x.io", "a@-b.co", "a@b-.co", "a@b..co", "@b.co",
           "a@b.co.", "a b@c.de", "a@b_c.de", "u@" + ".".join(["l" * 63] * 4)]
    for c in good + bad:
        assert bool(REFERENCE["email"](c)) == (c in good), c  # the reference itself
    check_exactly("email", good + bad, b"a-.@_ ", by_suffixes("email", ["", "a", "@a.b", "a@a.b", ".a", "a.a"]))


@pytest.mark.parametrize("lo,hi", [(5, 5), (6, 9), (0, 20), (30, 40), (66, 68), (120, 318)])
def test_emails_with_lengths(lo, hi):
    """minLength / maxLength beside email: an address closes iff the reference (EMAIL, and len within the bounds)
    accepts it, every prefix of one is taken, and random walks through the recognizer never dead-end and end in
    addresses the reference accepts."""
    schema = json.dumps({"type": "string", "format": "email", "minLength": lo, "maxLength": hi})
    rng = random.Random(lo * 1000 + hi)

    def taken(body):
        return _core.json_schema_prefix(schema, ('"' + body).encode())[0] - 1

    def label(n):
        return "".join(rng.choice("ab0-") if 0 < i < n - 1 else rng.choice("xy9") for i in range(n))

    candidates = []
    for _ in range(300):
        local = ".".join(rng.choice(["a", "b.c", "q+t", "x" * rng.randint(1, 30)]) for _ in range(rng.randint(1, 3)))
        domain = ".".join(label(rng.choice([1, 2, 5, 40, 62, 63, 64])) for _ in range(rng.randint(1, 5)))
        candidates.append(local + "@" + domain)
    valid = [c for c in candidates if EMAIL.fullmatch(c) and lo <= len(c) <= hi]
    for c in candidates:
        want = bool(EMAIL.fullmatch(c)) and lo <= len(c) <= hi
        assert (taken(c + '"') == len(c) + 1) == want, (c, len(c))
    for c in valid:
        assert all(taken(c[:k]) == k for k in range(0, len(c) + 1, 7)), c
    walks_done = 0
    for _ in range(30):
        doc = b""
        while True:
            nxt, complete, _ = _core.json_schema_next_bytes(schema, doc)
            if complete:
                break
            assert nxt, f"dead end after {doc!r}"
            quote = ord('"') in nxt and len(doc) > 1
            doc += b'"' if quote and rng.random() < 0.3 else bytes([rng.choice([b for b in nxt if b != ord('"')] or nxt)])
        value = json.loads(doc)
        assert EMAIL.fullmatch(value) and lo <= len(value) <= hi, value
        walks_done += 1
    assert walks_done == 30 and (valid or hi < 10)


def test_an_email_label_at_63_characters_closes_or_needs_two_more():
    # The full label closes (67) or goes on with "." and a label (69 on): 68 characters are out of reach.
    schema = json.dumps({"type": "string", "format": "email", "minLength": 68, "maxLength": 68})
    body = "a@b." + "c" * 63
    assert _core.json_schema_prefix(schema, ('"' + body).encode())[0] == len(body)  # the 63rd "c" refused
    assert _core.json_schema_prefix(schema, ('"' + body[:-1] + '.d"').encode())[0] == len(body) + 3  # 68, closed


def test_durations():
    good = ["P1Y", "P1Y2M", "P1Y2M3D", "P2M3D", "P3D", "P1W", "PT1H", "PT1H2M", "PT1H2M3S", "PT2M3S", "PT3S",
            "P1DT1H", "P1Y2M3DT4H5M6S", "P123456789D"]
    bad = ["P", "PT", "P1Y2D", "P1Y3D", "PT1H3S", "P1W2D", "P1DT", "P1.5D", "P1234567890D", "1D", "P1H", "PT1D"]
    check_exactly("duration", good + bad, b"0123456789PYMWDTHS",
                  by_suffixes("duration", ["", "D", "0D", "S", "0S", "M", "H"]))


@pytest.mark.parametrize("fmt", sorted(REFERENCE))
def test_random_walks_end_in_values_the_reference_accepts(fmt):
    schema = json.dumps({"type": "array", "items": {"type": "string", "format": fmt}, "minItems": 1,
                         "maxItems": 3})
    for doc in walks(schema, fmt, 60, 30, limit=1200):
        for value in json.loads(doc):
            assert REFERENCE[fmt](value), (fmt, value)


@pytest.mark.parametrize("schema,where,words", [
    ({"type": "string", "format": "hostname"}, "#/format", 'format "hostname" is not supported'),
    ({"properties": {"d": {"format": "date", "maxLength": 9}}}, "#/properties/d",
     "no string of 0 to 9 characters matches the pattern / format"),
    ({"properties": {"d": {"format": "email", "maxLength": 4}}}, "#/properties/d", "no email address has"),
    ({"properties": {"d": {"format": "email", "minLength": 320}}}, "#/properties/d", "no email address has"),
    ({"type": "string", "format": 3}, "#/format", "format must be a string"),
])
def test_unknown_formats_are_refused_by_name(schema, where, words):
    with pytest.raises(ValueError) as e:
        _core.check_json_schema(json.dumps(schema))
    assert str(e.value).startswith(f"response_format: json_schema at {where}:") and words in str(e.value)


def test_format_on_other_types_means_nothing():
    n, complete, can_end = _core.json_schema_prefix(json.dumps({"type": "integer", "format": "int32"}), b"12")
    assert n == 2 and can_end


def test_pydantic_model_with_formats_end_to_end():
    pytest.importorskip("pydantic")
    from typing import Optional

    from pydantic import BaseModel, Field

    class Event(BaseModel):
        id: uuid.UUID
        day: datetime.date
        at: datetime.datetime
        host: ipaddress.IPv4Address
        starts: Optional[datetime.time] = None
        attendees: int = Field(ge=1, le=500)

    for doc in walks(json.dumps(Event.model_json_schema()), 11, 40, 20, limit=1500):
        Event.model_validate_json(doc)
