"""JSON mode's byte recognizer (src/engine/json_recognizer.h) against Python's json module: on every prefix of
valid documents and on many random and mutated byte strings, it accepts exactly the strings that some
continuation makes one valid JSON object, and calls complete exactly the strings json.loads reads as an object.

The oracle knows nothing of the recognizer's states: it asks json.loads whether the string, followed by one of a
fixed set of fillers and then the closers of whatever brackets a plain scan finds open, is an object. The fillers
cover every way a prefix can stop short of a value's end (a half literal, a number needing a digit, an open
string, escape or character, a key without its value). The bounds of the recognizer are stated here too: at most
64 nested containers, at most 20 whitespace bytes in a row outside strings, nothing after the object, and numbers a
double holds (at most 20 integer, 200 fraction and 2 exponent digits)."""
import json
import random

import pytest

from attnzoo import _core

MAX_DEPTH = 64
MAX_WS = 20
MAX_DIGITS = {"integer": 20, "fraction": 200, "exponent": 2}
WS = b" \t\n\r"

_TAILS = [b"", b"0", b'"', b'":0', b":0", b'"a":0', b"{", b"rue", b"ue", b"e", b"alse", b"lse", b"se", b"ull", b"ll",
          b"l"]
_ESCAPES = [b"", b"n", b"0000", b"000", b"00", b"0"]
_UTF8 = [b"", b"\x80", b"\x80\x80", b"\x80\x80\x80", b"\xa0\x80", b"\x90\x80", b"\x90\x80\x80"]
FILLERS = sorted({u + e + t for u in _UTF8 for e in _ESCAPES for t in _TAILS}, key=len)


def _no_constants(name):
    raise ValueError(name)  # NaN / Infinity: Python's extension, not RFC 8259


def is_object(text):
    try:
        value = json.loads(text.decode("utf-8"), parse_constant=_no_constants)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(value, dict)


def scan(text):
    """Open brackets outside strings (a plain scan, no grammar), the longest whitespace run outside strings,
    whether the top-level container closed before the end or a number has more digits in a part than allowed, and
    the deepest nesting."""
    stack, in_string, escape, run, longest, closed_early, deepest = [], False, False, 0, 0, False, 0
    part, digits = None, 0  # outside strings, digits only occur in numbers
    for i, b in enumerate(text):
        c = bytes([b])
        if not in_string:
            if c.isdigit():
                part, digits = part or "integer", digits + 1
                closed_early |= digits > MAX_DIGITS[part]
            elif part and c in b".eE":
                part, digits = "fraction" if c == b"." else "exponent", 0
            elif not (part == "exponent" and c in b"+-"):
                part, digits = ("integer" if c == b"-" else None), 0
        if in_string:
            if escape:
                escape = False
            elif c == b"\\":
                escape = True
            elif c == b'"':
                in_string = False
            continue
        if c in WS:
            run += 1
            longest = max(longest, run)
            continue
        run = 0
        if c == b'"':
            in_string = True
        elif c in b"{[":
            stack.append(b"}" if c == b"{" else b"]")
            deepest = max(deepest, len(stack))
        elif c in b"}]" and stack:
            stack.pop()
            if not stack and i + 1 < len(text):
                closed_early = True
    return stack, longest, closed_early, deepest


def viable(text):
    """Whether some continuation makes `text` a JSON object, within the recognizer's bounds."""
    stack, longest, closed_early, deepest = scan(text)
    if longest > MAX_WS or closed_early or deepest > MAX_DEPTH:
        return False
    if is_object(text):
        return True
    for filler in FILLERS:
        candidate = text + filler
        open_, _, early, _ = scan(candidate)
        if early:
            continue
        if is_object(candidate + b"".join(reversed(open_))):
            return True
    return False


def check(text):
    accepted, complete = _core.json_object_prefix(text)
    if viable(text):
        assert accepted == len(text), (text, accepted)
        assert complete == is_object(text), text
    else:
        assert accepted < len(text), text
        # The recognizer stops at the first byte no continuation can follow: the bytes before it are viable.
        assert viable(text[:accepted]), (text, accepted)


DOCUMENTS = [
    {},
    {"a": 1},
    {"key": "value", "n": -12.5e+3, "t": True, "f": False, "z": None},
    {"nested": {"list": [1, 2, [3, {"x": []}], {}], "s": "tab\tquote\"slash\\/"}},
    {"unicode": "h\u00e9llo \u4e16\u754c \U0001f600", "esc": "\u0001\u001f"},
    {"numbers": [0, -0, 0.5, 1e10, 1E-7, -3.25e+2, 123456789]},
    {"a": [[[[[[[[]]]]]]]]},
]


def documents():
    for d in DOCUMENTS:
        yield json.dumps(d).encode()
        yield json.dumps(d, ensure_ascii=False).encode()
        yield json.dumps(d, indent=2).encode()
        yield json.dumps(d, separators=(",", ":")).encode()
    yield b'{"u": "\\u00e9\\uD83D\\ude00", "e": 0.0E0}'
    yield b'  {\n\t"a" :\r\n 1 }'


def test_every_prefix_of_valid_documents():
    count = 0
    for doc in documents():
        assert is_object(doc)
        for i in range(len(doc) + 1):
            check(doc[:i])
            count += 1
        accepted, complete = _core.json_object_prefix(doc)
        assert accepted == len(doc) and complete
    assert count > 1000


def test_random_mutations_and_strings():
    rng = random.Random(0)
    alphabet = list(b'{}[]":,-+.0123456789eEtrufalsn \\/bu\t\n') + [0x01, 0xC3, 0xA9, 0xE4, 0xB8, 0x80, 0xF0, 0xED,
                                                                   0xA0, 0xFF, 0xC0]
    docs = list(documents())
    rejected = accepted_all = 0
    for _ in range(1200):
        doc = bytearray(rng.choice(docs))
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(doc) + 1)
            op = rng.randrange(3)
            if op == 0:
                doc[i:i] = bytes([rng.choice(alphabet)])
            elif op == 1 and i < len(doc):
                del doc[i]
            elif i < len(doc):
                doc[i] = rng.choice(alphabet)
        text = bytes(doc[: rng.randint(0, len(doc))])
        check(text)
        if _core.json_object_prefix(text)[0] == len(text):
            accepted_all += 1
        else:
            rejected += 1
    for _ in range(1200):
        text = b"{" + bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        check(text)
    # Both outcomes are exercised.
    assert rejected > 150 and accepted_all > 150


@pytest.mark.parametrize("text,ok", [
    (b"{" + b" " * MAX_WS, True),
    (b"{" + b" " * (MAX_WS + 1), False),
    (b'{"a": "' + b" " * 100, True),           # whitespace inside a string is text, not bounded
    (b"{\"a\":" + b"[" * (MAX_DEPTH - 1), True),
    (b"{\"a\":" + b"[" * MAX_DEPTH, False),
    (b"{} ", False),                            # the object is the whole answer
    (b"[1]", False),                            # an object at the top, as OpenAI's JSON mode
    (b'{"a": 01', False),
    (b'{"a": NaN', False),
    (b'{"a": "\xed\xa0\x80', False),            # an encoded surrogate
    (b'{"a": "\xc0\xaf', False),                # an overlong form
    (b'{"a": "\x1f', False),                    # a raw control byte in a string
])
def test_bounds_and_edges(text, ok):
    accepted, _ = _core.json_object_prefix(text)
    assert (accepted == len(text)) == ok
    if not ok:
        assert not viable(text)
