"""python/tests/data/pythonic_tool_calls.json: answers in vLLM's pythonic tool-call format with the calls Python
itself reads out of them (ast.parse, each keyword's value through ast.literal_eval, as JSON), for the C++ parser's
test (src/answers/tool_format_pythonic_test.cc, PythonicToolCalls.MatchesPythonsAst) to compare against. This test
checks that every stored expectation is what Python reads; `python test_pythonic_fixture.py` rewrites the file.

The texts are random lists of calls whose values are Python literals written by repr() (either quote, \\x / \\u /
\\U escapes, exponents, negative numbers, nested lists and dicts) or by json.dumps for strings, and broken
variants (text around the list, a positional argument, a variable) whose expectation is null: no call."""
import ast
import json
import keyword
import os
import random

PATH = os.path.join(os.path.dirname(__file__), "data", "pythonic_tool_calls.json")
ALPHABET = list("abcXYZ019 _-.,:;[](){}'\"\\/\n\t#=") + ["é", "中", "😀", "\x00", "\x7f", "\u2028", "\U0001F600"]


def _python_reads(text):
    """The calls as Python reads them, or None where the text is not a list of calls with literal keywords."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(tree, ast.List) or not tree.elts:
        return None
    calls = []
    for call in tree.elts:
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.args:
            return None
        try:
            arguments = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
        except ValueError:
            return None
        if any(kw.arg is None for kw in call.keywords):
            return None
        if not _json_value(arguments):
            return None
        calls.append({"name": call.func.id, "arguments": arguments})
    return calls


def _json_value(v):
    if isinstance(v, dict):
        return all(isinstance(k, str) and _json_value(x) for k, x in v.items())
    if isinstance(v, list):
        return all(_json_value(x) for x in v)
    return v is None or isinstance(v, (bool, int, float, str))


def _name(rng):
    while True:
        n = rng.choice("abcdefgxyz_") + "".join(rng.choice("abcdefgh_0123") for _ in range(rng.randrange(0, 8)))
        if not keyword.iskeyword(n):
            return n


def _value(rng, depth=0):
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 10)))
    if kind == 1:
        return rng.randrange(-10**12, 10**12)
    if kind == 2:
        return rng.choice([0.5, -2.25, 1e-7, 3.14159, -1e300, 6.02e23, 0.1 + 0.2, rng.uniform(-1e6, 1e6)])
    if kind == 3:
        return rng.choice([True, False, None])
    if kind in (4, 5):
        return rng.choice(["", "it's", 'say "hi"', "back\\slash", "tab\tnew\nline"])
    if kind in (6, 7):
        return [_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    return {"".join(rng.choice(ALPHABET) for _ in range(rng.randrange(1, 5))): _value(rng, depth + 1)
            for _ in range(rng.randrange(0, 4))}


def _literal(rng, v):
    if isinstance(v, str) and rng.random() < 0.3:
        return json.dumps(v, ensure_ascii=False)  # a double-quoted JSON string is a Python literal too
    if isinstance(v, list):
        return "[" + ", ".join(_literal(rng, x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_literal(rng, k)}: {_literal(rng, x)}" for k, x in v.items()) + "}"
    return repr(v)


def _texts(rng, n):
    out = []
    for i in range(n):
        calls = []
        for _ in range(rng.randrange(1, 4)):
            keys = list(dict.fromkeys(_name(rng) for _ in range(rng.randrange(0, 4))))
            args = ", ".join(f"{k}={_literal(rng, _value(rng))}" for k in keys)
            calls.append(f"{_name(rng)}({args})")
        text = "[" + rng.choice([", ", ",", ",\n "]).join(calls) + "]"
        if i % 5 == 4:  # broken variants: no call
            text = rng.choice(["Sure: " + text, text + " done", text.replace("(", "(1, ", 1),
                               text.replace("[", "[f(a=b), ", 1)])
        out.append(text)
    return out


def _fixture():
    texts = _texts(random.Random(20260), 240)
    return [{"text": t, "calls": _python_reads(t)} for t in texts]


def test_fixture_is_what_python_reads():
    with open(PATH, encoding="utf-8") as f:
        cases = json.load(f)
    assert len(cases) >= 200
    assert sum(c["calls"] is None for c in cases) >= 40 and sum(c["calls"] is not None for c in cases) >= 150
    for c in cases:
        assert c["calls"] == _python_reads(c["text"]), c["text"]


if __name__ == "__main__":
    with open(PATH, "w", encoding="utf-8") as f:
        json.dump(_fixture(), f, ensure_ascii=False, indent=0)
        f.write("\n")
