"""python/tests/data/section_tool_calls.json: answers in the DeepSeek-V3, DeepSeek-V3.1 and Kimi-K2 tool-call
formats with the content and calls that vLLM's parsers' regular expressions (deepseek_v3, deepseek_v31, kimi_k2,
transcribed below) and Python's json read out of them, for the C++ parsers' test
(src/answers/tool_format_sections_test.cc, SectionToolCalls.MatchVllmRegexes) to compare against. This test checks
that every stored expectation is what those expressions read; `python test_section_calls_fixture.py` rewrites
the file.

The answers are random: content (possibly none) before the section, one to three calls of random names whose
arguments are random JSON objects (nested, escaped, non-ASCII) written compactly or spaced, each call closed, as the
models' templates write them."""
import json
import os
import random
import re

from test_pythonic_fixture import _name, _value

PATH = os.path.join(os.path.dirname(__file__), "data", "section_tool_calls.json")
PATTERNS = {
    "deepseek_v3": re.compile(r"<｜tool▁call▁begin｜>(?P<type>.*)<｜tool▁sep｜>(?P<function_name>.*)\n```json\n"
                              r"(?P<function_arguments>.*)\n```<｜tool▁call▁end｜>"),
    "deepseek_v31": re.compile(r"<｜tool▁call▁begin｜>(?P<function_name>.*?)<｜tool▁sep｜>(?P<function_arguments>.*?)"
                               r"<｜tool▁call▁end｜>"),
    "kimi_k2": re.compile(r"<\|tool_call_begin\|>\s*(?P<tool_call_id>[^<]+:\d+)\s*<\|tool_call_argument_begin\|>\s*"
                          r"(?P<function_arguments>(?:(?!<\|tool_call_begin\|>).)*?)\s*<\|tool_call_end\|>", re.DOTALL),
}
BEGIN = {"deepseek_v3": "<｜tool▁calls▁begin｜>", "deepseek_v31": "<｜tool▁calls▁begin｜>",
         "kimi_k2": "<|tool_calls_section_begin|>"}
END = {"deepseek_v3": "<｜tool▁calls▁end｜>", "deepseek_v31": "<｜tool▁calls▁end｜>",
       "kimi_k2": "<|tool_calls_section_end|>"}


def _vllm_reads(fmt, text):
    """(content, [{"name", "arguments", "id"?}]) as vLLM's parser reads the answer, the arguments json.loads'ed."""
    at = text.find(BEGIN[fmt])
    if at < 0:
        return text, []
    calls = []
    for m in PATTERNS[fmt].finditer(text):
        if fmt == "kimi_k2":
            call_id = m.group("tool_call_id")
            calls.append({"name": call_id.split(":")[0].split(".")[-1], "id": call_id,
                          "arguments": json.loads(m.group("function_arguments"))})
        else:
            calls.append({"name": m.group("function_name"), "arguments": json.loads(m.group("function_arguments"))})
    return text[:at], calls


def _arguments(rng):
    keys = list(dict.fromkeys(_name(rng) for _ in range(rng.randrange(0, 4))))
    value = {k: _value(rng) for k in keys}
    if rng.random() < 0.5:
        return json.dumps(value, ensure_ascii=rng.random() < 0.5)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _answer(rng, fmt):
    content = rng.choice(["", "", "Let me check.", "Sure, calling:\n", "été 中文 "])
    calls = []
    for i in range(rng.randrange(1, 4)):
        name, args = _name(rng), _arguments(rng)
        if fmt == "deepseek_v3":
            calls.append(f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{args}\n```<｜tool▁call▁end｜>")
        elif fmt == "deepseek_v31":
            calls.append(f"<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{args}<｜tool▁call▁end｜>")
        else:
            prefix = rng.choice(["functions.", ""])
            calls.append(f"<|tool_call_begin|>{prefix}{name}:{i}<|tool_call_argument_begin|>{args}<|tool_call_end|>")
    return content + BEGIN[fmt] + ("\n" if fmt == "deepseek_v3" else "").join(calls) + END[fmt]


def _fixture():
    rng = random.Random(31337)
    out = []
    for fmt in PATTERNS:
        for _ in range(60):
            text = _answer(rng, fmt)
            content, calls = _vllm_reads(fmt, text)
            out.append({"format": fmt, "text": text, "content": content, "calls": calls})
    return out


def test_fixture_is_what_vllm_reads():
    with open(PATH, encoding="utf-8") as f:
        cases = json.load(f)
    assert {c["format"] for c in cases} == set(PATTERNS) and len(cases) >= 150
    for c in cases:
        content, calls = _vllm_reads(c["format"], c["text"])
        assert calls, c["text"]
        assert (c["content"], c["calls"]) == (content, calls), c["text"]


if __name__ == "__main__":
    with open(PATH, "w", encoding="utf-8") as f:
        json.dump(_fixture(), f, ensure_ascii=False, indent=0)
        f.write("\n")
