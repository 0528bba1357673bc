"""Tool calls streamed as vLLM streams them, end to end: `attnzoo serve` on the tiny random Llamas of
test_tool_calls_serve (Qwen2.5's template: Hermes) and test_tool_formats_serve (Llama 3.1's and Mistral v0.3's),
driven by the openai client.

For each format, over seeds at temperature 1 with n=2, a streamed answer (stream_options.include_usage) and a
whole one with the same seed are the same answer: per choice the same content, the same calls in the same order,
and each call's argument fragments, concatenated, equal to the whole answer's `arguments` byte for byte — gathered
by hand and by the SDK's own ChatCompletionStreamState and `.stream()` helper. The deltas have vLLM's shapes (the
first names the call, with id and type; later ones carry only argument text) and calls do go out in several
fragments. "required" makes one or more calls in the format's own syntax, several on some seeds, each valid against
its own tool's parameters; parallel_tool_calls false keeps one."""
import json
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
openai = pytest.importorskip("openai")

from test_chat_cli import needs_cli  # noqa: E402
from test_json_schema import valid  # noqa: E402
import test_tool_calls_serve as hermes  # noqa: E402
import test_tool_formats_serve as formats  # noqa: E402

TOOLS, WEATHER, TIME = hermes.TOOLS, hermes.WEATHER, hermes.TIME
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
QUESTION = hermes.QUESTION
NAMED = {"type": "function", "function": {"name": "get_weather"}}
SEEDS = 12


@pytest.fixture(scope="module", params=["hermes", "llama3_json", "mistral"])
def served(request, tmp_path_factory):
    from test_serve import ServerProcess
    if request.param == "hermes":
        path = hermes._checkpoint(tmp_path_factory)
    else:
        fmt = formats.LLAMA if request.param == "llama3_json" else formats.MISTRAL
        path = formats._checkpoint(tmp_path_factory.mktemp(request.param), fmt)
    s = ServerProcess(path, "--kv-cache-memory", str(64 << 20))
    yield request.param, s
    assert s.stop() == 0


def _gather(chunks):
    """Per choice index: content, calls {index: {id, name, arguments, fragments}}, finish_reason; and the usage."""
    out, usage, problems = {}, None, []
    for chunk in chunks:
        if chunk.usage is not None:
            usage = chunk.usage
            if chunk.choices:
                problems.append("usage beside choices")
        for ch in chunk.choices:
            c = out.setdefault(ch.index, {"content": "", "calls": {}, "reason": None})
            c["content"] += ch.delta.content or ""
            for d in ch.delta.tool_calls or []:
                f = d.function
                if d.index not in c["calls"]:
                    # vLLM's first delta: index, id, type "function", the name, arguments (possibly "").
                    if not (d.id and d.type == "function" and f.name and f.arguments is not None):
                        problems.append(f"first delta of call {d.index} lacks id/type/name: {d}")
                    if d.index != len(c["calls"]):
                        problems.append(f"call {d.index} announced out of order")
                    c["calls"][d.index] = {"id": d.id, "name": f.name, "arguments": f.arguments or "",
                                           "fragments": 1}
                else:
                    if d.id or d.type or f.name:
                        problems.append(f"a later delta of call {d.index} repeats id/type/name: {d}")
                    c["calls"][d.index]["arguments"] += f.arguments or ""
                    c["calls"][d.index]["fragments"] += 1
            if ch.finish_reason:
                if c["reason"]:
                    problems.append("two finish reasons")
                c["reason"] = ch.finish_reason
    return out, usage, problems


def _pair(client, seed, tools=TOOLS, max_tokens=160, **kw):
    args = dict(model="tiny", messages=QUESTION, tools=tools, max_tokens=max_tokens, temperature=1.0, seed=seed, n=2,
                **kw)
    whole = client.chat.completions.create(**args)
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **args))
    return whole, chunks


def _same(whole, streamed, what):
    """The streamed choice is the whole one: content, calls and arguments byte for byte, finish_reason."""
    for c in whole.choices:
        s = streamed[c.index]
        calls = c.message.tool_calls or []
        assert s["content"] == (c.message.content or ""), (what, c.index, s["content"], c.message.content)
        assert s["reason"] == c.finish_reason, (what, c.index)
        if c.finish_reason == "length":
            # A call cut by max_tokens is no call (its text is the content, as above); the stream had already
            # announced it and cannot take it back (vLLM's streams neither).
            continue
        assert [v["name"] for v in s["calls"].values()] == [t.function.name for t in calls], (what, c.index)
        for i, t in enumerate(calls):
            assert s["calls"][i]["arguments"] == t.function.arguments, (what, c.index, i)


@needs_cli
def test_streamed_calls_equal_the_whole_answer(served):
    fmt, server = served
    client = server.client()
    compared = fragmented = 0
    for seed in range(SEEDS):
        for choice in ("required", NAMED, "auto"):
            whole, chunks = _pair(client, seed, tool_choice=choice)
            streamed, usage, problems = _gather(chunks)
            what = (fmt, seed, choice)
            assert not problems, (what, problems)
            assert sorted(streamed) == [0, 1], what
            _same(whole, streamed, what)
            assert chunks[-1].usage is not None and not chunks[-1].choices, what
            assert usage.completion_tokens == whole.usage.completion_tokens, what
            assert usage.prompt_tokens == whole.usage.prompt_tokens, what
            # The SDK's own accumulation gives the same message.
            state = openai.lib.streaming.chat.ChatCompletionStreamState()
            for chunk in chunks:
                state.handle_chunk(chunk)
            final = state.current_completion_snapshot  # get_final_completion refuses "length" answers
            for c in whole.choices:
                if c.finish_reason == "length":
                    continue
                got = final.choices[c.index].message.tool_calls or []
                want = c.message.tool_calls or []
                assert [(t.id, t.function.name, t.function.arguments) for t in got] == \
                    [(streamed[c.index]["calls"][i]["id"], t.function.name, t.function.arguments)
                     for i, t in enumerate(want)], what
            for c in whole.choices:
                calls = streamed[c.index]["calls"].values()
                compared += len(calls)
                fragmented += sum(v["fragments"] > 2 for v in calls)
                if c.finish_reason == "tool_calls":
                    if choice != "auto":
                        assert (c.message.content or "") == "", what
                    for t in c.message.tool_calls:
                        schema = SCHEMAS[t.function.name]
                        assert valid(json.loads(t.function.arguments), schema, schema), (what, t.function)
                    if choice == NAMED:
                        assert [t.function.name for t in c.message.tool_calls] == ["get_weather"], what
    assert compared >= SEEDS, f"{fmt}: only {compared} calls compared"
    assert fragmented >= SEEDS // 2, f"{fmt}: only {fragmented} calls streamed in more than two deltas"


@needs_cli
def test_sdk_stream_helper_and_one_call_without_parallel(served):
    fmt, server = served
    client = server.client()
    counts = set()
    for seed in range(SEEDS):
        kw = dict(model="tiny", messages=QUESTION, tools=TOOLS, tool_choice="required", max_tokens=160,
                  temperature=1.0, seed=seed)
        whole = client.chat.completions.create(**kw)
        one = client.chat.completions.create(parallel_tool_calls=False, **kw)
        if one.choices[0].finish_reason == "tool_calls":
            counts.add(len(one.choices[0].message.tool_calls))
        # The SDK's .stream() helper: its argument events, and the final message, match the whole answer.
        deltas = {}
        with client.chat.completions.stream(**kw) as stream:
            for event in stream:
                if event.type == "tool_calls.function.arguments.delta":
                    deltas[event.index] = deltas.get(event.index, "") + event.arguments_delta
            final = stream.current_completion_snapshot
        want = whole.choices[0].message.tool_calls or []
        got = final.choices[0].message.tool_calls or []
        if whole.choices[0].finish_reason == "length":
            continue
        assert [(t.function.name, t.function.arguments) for t in got] == \
            [(t.function.name, t.function.arguments) for t in want], (fmt, seed)
        if whole.choices[0].finish_reason == "tool_calls":
            assert [deltas.get(i, "") for i in range(len(want))] == [t.function.arguments for t in want], (fmt, seed)
    assert counts == {1}, (fmt, counts)


# Short calls, so that a random model's second and third calls end within max_tokens.
PING = {"type": "object", "properties": {}}
ZONE = {"type": "object", "properties": {"zone": {"enum": ["CET", "UTC"]}}, "required": ["zone"]}
SHORT = [{"type": "function", "function": {"name": "ping", "parameters": PING}},
         {"type": "function", "function": {"name": "zone", "parameters": ZONE}}]


@needs_cli
def test_required_makes_several_calls_each_valid(served):
    """After each call the mask leaves the model the end of its turn or the format's next call; a random model takes
    the second on some seeds. Every call validates against its own tool's parameters, streamed answers equal the
    whole ones, and parallel_tool_calls false never gives more than one."""
    fmt, server = served
    client = server.client()
    counts = []
    for seed in range(24):
        whole, chunks = _pair(client, seed, tools=SHORT, max_tokens=300, tool_choice="required")
        streamed, _, problems = _gather(chunks)
        assert not problems, (fmt, seed, problems)
        _same(whole, streamed, (fmt, seed))
        for c in whole.choices:
            if c.finish_reason != "tool_calls":
                assert c.finish_reason == "length", (fmt, seed, c)
                continue
            assert (c.message.content or "") == "", (fmt, seed)
            for t in c.message.tool_calls:
                schema = {"ping": PING, "zone": ZONE}[t.function.name]
                assert valid(json.loads(t.function.arguments), schema, schema), (fmt, seed, t.function)
            counts.append(len(c.message.tool_calls))
        one = client.chat.completions.create(model="tiny", messages=QUESTION, tools=SHORT, tool_choice="required",
                                             max_tokens=300, temperature=1.0, seed=seed, n=2,
                                             parallel_tool_calls=False)
        for c in one.choices:
            assert c.finish_reason != "tool_calls" or len(c.message.tool_calls) == 1, (fmt, seed)
    assert len(counts) >= 24, f"{fmt}: only {len(counts)} of 48 answers finished"
    assert max(counts) >= 2 and min(counts) == 1, (fmt, counts)
