"""The DeepSeek-V3 / V3.1, Kimi-K2 and pythonic tool-call formats end to end: `attnzoo serve` on tiny random Llamas
that carry the published DeepSeek-V3, DeepSeek-V3.1 and Kimi-K2 chat templates and vLLM's Llama 3.2 pythonic
template (their markers special tokens, as in the real tokenizers), driven by the openai client.

A named tool_choice at temperature 1.0 over many seeds gives one call of that function whose arguments json.loads
and test_json_schema's independent validator passes against the function's parameters (streamed too: announced,
then the arguments in several deltas that join to the whole answer's byte for byte); Kimi's id is
"functions.NAME:0" as its template numbers calls. Forced choices the format cannot hold are a 400 naming the
format. A named choice's prompt is transformers' rendering followed by the format's opening. The next turn, holding
the server's call and a tool result, has transformers' apply_chat_template(messages, tools=tools) ids (/tokenize)
and the transformers model's first-token log-probabilities. DeepSeek's templates join the arguments as a string and
need the turn's null content, which transformers 5 drops, so there transformers' jinja renderer is given the
messages as they are; the others get the arguments as an object, as vLLM passes them. A forced section marker that
leads to no call comes back as content."""
import json
import os
import subprocess

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from test_chat_cli import needs_cli  # noqa: E402
from test_json_schema import valid  # noqa: E402
from test_tool_calls_serve import TOOLS, WEATHER, _calls, _streamed  # noqa: E402
from test_tool_formats_serve import _checkpoint  # noqa: E402

SEEDS = 12
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}
CALL = {"city": "Paris", "days": 3, "unit": "celsius", "hourly": True}

DS_SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
               "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
               "<｜tool▁sep｜>", "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>",
               "<｜tool▁output▁end｜>"]
FORMATS = {
    "deepseek_v3": {
        "template": "deepseek-ai-DeepSeek-V3.jinja", "specials": DS_SPECIALS,
        "bos": "<｜begin▁of▁sentence｜>", "eos": "<｜end▁of▁sentence｜>", "marker": "<｜tool▁calls▁begin｜>",
        "training": ["function get_weather\n```json\n" + json.dumps(CALL) + "\n```"], "args_as_text": True},
    "deepseek_v31": {
        "template": "deepseek-ai-DeepSeek-V3.1.jinja", "specials": DS_SPECIALS,
        "bos": "<｜begin▁of▁sentence｜>", "eos": "<｜end▁of▁sentence｜>", "marker": "<｜tool▁calls▁begin｜>",
        "training": ["</think>get_weather" + json.dumps(CALL)], "args_as_text": True},
    "kimi_k2": {
        "template": "moonshotai-Kimi-K2.jinja",
        "specials": ["[BOS]", "[EOS]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>",
                     "<|im_middle|>", "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                     "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"],
        "bos": "[BOS]", "eos": "<|im_end|>", "marker": "<|tool_calls_section_begin|>",
        "training": ["functions.get_weather:0" + json.dumps(CALL)], "args_as_text": False},
    "pythonic": {
        "template": "vllm-llama3.2-pythonic.jinja",
        "specials": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                     "<|eot_id|>", "<|eom_id|>"],
        "bos": "<|begin_of_text|>", "eos": "<|eot_id|>", "marker": None,
        "training": ["[get_weather(city='Paris', days=3, unit='celsius', hourly=True)]"], "args_as_text": False},
}


@pytest.fixture(scope="module", params=list(FORMATS))
def served(request, tmp_path_factory):
    pytest.importorskip("openai")
    from test_serve import ServerProcess
    fmt = FORMATS[request.param]
    path = _checkpoint(tmp_path_factory.mktemp(request.param), fmt)
    s = ServerProcess(path, "--kv-cache-memory", str(64 << 20))
    yield request.param, fmt, path, s
    assert s.stop() == 0


def _post_to(server, path, body):
    status, text = server.raw("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    return status, json.loads(text)


def _post(server, body):
    return _post_to(server, "/v1/chat/completions", body)


OPENINGS = {"deepseek_v3": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n",
            "deepseek_v31": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>",
            "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                       "<|tool_call_argument_begin|>"}


@needs_cli
def test_forced_prompt_ends_with_the_opening(served):
    """A named choice's prompt is transformers' rendering of the conversation followed by the format's opening up to
    the arguments, the function's name in it, its markers special tokens: the same ids."""
    name, _, path, server = served
    if name not in OPENINGS:
        return
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(path)
    text = tok.apply_chat_template(QUESTION, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    want = tok(text + OPENINGS[name], add_special_tokens=False)["input_ids"]
    status, got = _post_to(server, "/tokenize", {"model": "tiny", "messages": QUESTION, "tools": TOOLS,
                                                 "tool_choice": NAMED})
    assert status == 200 and got["tokens"] == want, (got, want)
    specials = {tok.convert_tokens_to_ids(t) for t in FORMATS[name]["specials"]}
    opening = want[len(tok(text, add_special_tokens=False)["input_ids"]):]
    assert sum(t in specials for t in opening) == 3, opening  # the section's and the call's markers: single tokens


def _named_call(client, seed, stream=False):
    kw = dict(model="tiny", messages=QUESTION, tools=TOOLS, tool_choice=NAMED, max_tokens=200, temperature=1.0,
              seed=seed)
    if stream:
        return _streamed(client, **kw)
    return client.chat.completions.create(**kw).choices[0]


@needs_cli
def test_forced_choices(served):
    name, _, _, server = served
    client = server.client()
    if name == "pythonic":
        # Its arguments are Python literals, which the JSON schema machinery cannot hold: refused, naming the format.
        for choice in (NAMED, "required"):
            status, err = _post(server, {"model": "tiny", "messages": QUESTION, "tools": TOOLS, "tool_choice": choice,
                                         "max_tokens": 4})
            assert status == 400 and err["error"]["param"] == "tool_choice", err
            assert "pythonic" in err["error"]["message"], err
        return
    made, ids = 0, set()
    for seed in range(SEEDS):
        c = _named_call(client, seed)
        if c.finish_reason == "length":
            assert not _calls(c) and c.message.content
            continue
        assert c.finish_reason == "tool_calls", c
        calls = _calls(c)
        assert len(calls) == 1 and c.message.content is None
        assert calls[0].function.name == "get_weather"
        if name == "kimi_k2":
            assert calls[0].id == "functions.get_weather:0"
        else:
            assert calls[0].id.startswith("call_") and calls[0].id not in ids
        ids.add(calls[0].id)
        args = json.loads(calls[0].function.arguments)
        assert valid(args, WEATHER, WEATHER), (seed, args)
        made += 1
        if made == 1:
            content, streamed, reason = _named_call(client, seed, stream=True)
            assert content == "" and reason == "tool_calls" and len(streamed) == 1
            assert streamed[0].function.name == "get_weather"
            assert json.loads(streamed[0].function.arguments) == args
    assert made >= SEEDS // 2, f"only {made} of {SEEDS} calls finished"
    # "required" over several tools would choose the name outside the JSON: refused, naming the format.
    status, err = _post(server, {"model": "tiny", "messages": QUESTION, "tools": TOOLS, "tool_choice": "required",
                                 "max_tokens": 4})
    assert status == 400 and err["error"]["param"] == "tool_choice" and name in err["error"]["message"], err
    # With one tool "required" is that tool.
    r = client.chat.completions.create(model="tiny", messages=QUESTION, tools=TOOLS[1:], tool_choice="required",
                                       max_tokens=200, temperature=1.0, seed=1)
    c = r.choices[0]
    assert c.finish_reason == "length" or _calls(c)[0].function.name == "get_time"


def _stream_pieces(client, **kw):
    """A streamed answer's content, its calls [(id, name, arguments)] joined as clients join the deltas (the first
    names the call, later ones add argument text), each call's number of deltas, and the finish_reason."""
    content, calls, deltas, reason = "", [], [], None
    for chunk in client.chat.completions.create(stream=True, **kw):
        for ch in chunk.choices:
            content += ch.delta.content or ""
            for d in ch.delta.tool_calls or []:
                if d.id:
                    assert d.index == len(calls) and d.type == "function" and d.function.name, d
                    calls.append((d.id, d.function.name, d.function.arguments or ""))
                    deltas.append(1)
                else:
                    assert d.index < len(calls) and not d.function.name and d.function.arguments, d
                    calls[d.index] = calls[d.index][:2] + (calls[d.index][2] + d.function.arguments,)
                    deltas[d.index] += 1
            reason = ch.finish_reason or reason
    return content, calls, deltas, reason


@needs_cli
def test_named_calls_stream_their_arguments_as_written(served):
    """As vLLM's deepseek_v3 / deepseek_v31 / kimi_k2 parsers stream: the call is announced, then its arguments go
    out in pieces as the model writes them; joined, they are the whole answer's arguments byte for byte (same seed),
    Kimi's id is the model's own."""
    name, _, _, server = served
    if name == "pythonic":
        pytest.skip("pythonic calls go out whole at the end, and a forced pythonic choice is refused")
    client = server.client()
    compared = fragmented = 0
    for seed in range(SEEDS):
        c = _named_call(client, seed)
        content, calls, deltas, reason = _stream_pieces(
            client, model="tiny", messages=QUESTION, tools=TOOLS, tool_choice=NAMED, max_tokens=200, temperature=1.0,
            seed=seed)
        assert reason == c.finish_reason, seed
        if c.finish_reason == "length":  # cut: announced, then the arguments come back as content too
            assert content == c.message.content, seed
            continue
        (call,) = _calls(c)
        assert content == "" and [(n, a) for _, n, a in calls] == [("get_weather", call.function.arguments)], seed
        if name == "kimi_k2":
            assert calls[0][0] == call.id == "functions.get_weather:0"
        compared += 1
        fragmented += deltas[0] >= 3  # the first delta, then at least two with argument text
    assert compared >= SEEDS // 2 and fragmented >= compared // 2, (compared, fragmented)


@needs_cli
def test_auto_answers_without_a_call_are_content(served):
    """A random model writes no call of its own; logit_bias forcing the section's opening marker gives an answer
    that begins a section but holds no call, so it comes back whole as content, the marker kept."""
    name, fmt, path, server = served
    client = server.client()
    for seed in range(6):
        r = client.chat.completions.create(model="tiny", messages=QUESTION, tools=TOOLS, max_tokens=30,
                                           temperature=1.0, seed=seed)
        assert not _calls(r.choices[0]) and r.choices[0].finish_reason != "tool_calls"
    if fmt["marker"] is None:
        return
    marker = tokenizers.Tokenizer.from_file(os.path.join(path, "tokenizer.json")).token_to_id(fmt["marker"])
    for stream in (False, True):
        kw = dict(model="tiny", messages=QUESTION, tools=TOOLS, max_tokens=3, temperature=0,
                  logit_bias={str(marker): 100})
        if stream:
            content, calls, reason = _streamed(client, **kw)
            assert not calls
        else:
            c = client.chat.completions.create(**kw).choices[0]
            assert not _calls(c)
            content, reason = c.message.content, c.finish_reason
        assert content == fmt["marker"] * 3 and reason == "length", (stream, content)


@needs_cli
def test_tool_result_turn_renders_as_transformers(served):
    name, fmt, path, server = served
    from transformers import AutoTokenizer, LlamaForCausalLM
    client = server.client()
    if name == "pythonic":
        call_id, arguments = "call_0", json.dumps(CALL)
    else:
        c = next(c for c in (_named_call(client, seed) for seed in range(SEEDS)) if c.finish_reason == "tool_calls")
        call_id, arguments = _calls(c)[0].id, _calls(c)[0].function.arguments
    messages = QUESTION + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": call_id, "content": "{\"temp\": 21}"}]
    hf_messages = json.loads(json.dumps(messages))
    if not fmt["args_as_text"]:
        hf_messages[1]["tool_calls"][0]["function"]["arguments"] = json.loads(arguments)
    tok = AutoTokenizer.from_pretrained(path)
    if fmt["args_as_text"]:
        # DeepSeek's templates test `message['content'] is none` for a turn of calls; transformers 5's
        # apply_chat_template drops null keys first, after which both templates raise. Its own renderer, given the
        # message as the server (and transformers 4) passes it, content null, is the reference.
        from transformers.utils.chat_template_utils import render_jinja_template
        with pytest.raises(Exception):
            tok.apply_chat_template(hf_messages, tools=TOOLS, add_generation_prompt=True, tokenize=False)
        rendered, _ = render_jinja_template(conversations=[hf_messages], tools=TOOLS, chat_template=tok.chat_template,
                                            add_generation_prompt=True, **tok.special_tokens_map)
        text = rendered[0]
        ids = tok(text, add_special_tokens=False)["input_ids"]
    else:
        ids = tok.apply_chat_template(hf_messages, tools=TOOLS, add_generation_prompt=True, tokenize=True,
                                      return_dict=False)
        text = tok.apply_chat_template(hf_messages, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    expect_in_text = {"deepseek_v3": "<｜tool▁sep｜>get_weather\n```json\n" + arguments,
                      "deepseek_v31": "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>" + arguments,
                      "kimi_k2": "## Return of " + call_id,
                      "pythonic": "[get_weather(city=Paris, days=3, unit=celsius, hourly=True)]"}[name]
    assert expect_in_text in text, text
    model = LlamaForCausalLM.from_pretrained(path).eval()
    with torch.no_grad():
        first = torch.log_softmax(model(torch.tensor([ids])).logits[0, -1].float(), -1).topk(5).values.tolist()
    status, tokenized = _post_to(server, "/tokenize", {"model": "tiny", "messages": messages, "tools": TOOLS})
    assert status == 200 and tokenized["tokens"] == ids, (tokenized, ids)
    r = client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, tool_choice="none",
                                       max_tokens=1, temperature=0, logprobs=True, top_logprobs=5)
    assert r.usage.prompt_tokens == len(ids)
    # The first token's distribution on a random model moves with any prompt id (a one-digit change in the prompt
    # moves it 5e-4): the prompts are the same ids. (Later greedy tokens are not compared: this flat random model
    # has near-ties of 1e-4 that float summation order may break either way.)
    ours = sorted((t.logprob for t in r.choices[0].logprobs.content[0].top_logprobs), reverse=True)
    assert ours == pytest.approx(first, abs=2e-5), (ours, first)
    if fmt["args_as_text"]:
        # Arguments that are not a JSON object are a 400 naming the message's call, as for every format.
        messages[1]["tool_calls"][0]["function"]["arguments"] = "[1]"
        status, err = _post(server, {"model": "tiny", "messages": messages, "tools": TOOLS, "max_tokens": 2})
        assert status == 400 and "messages[1].tool_calls[0].function.arguments" in err["error"]["message"], err


@needs_cli
def test_tool_call_parser_flag(tmp_path):
    """--tool-call-parser names the new formats: kimi_k2 over Kimi's template starts and reads that format (a named
    call comes back with Kimi's id); pythonic over it overrides the detected format (a named choice is then the
    pythonic 400); deepseek_v31 over DeepSeek-V3.1's published template is refused at start-up, naming the flag and
    the model, since that template never writes the tools list."""
    pytest.importorskip("openai")
    from test_serve import CLI, ServerProcess
    kimi = _checkpoint(tmp_path / "kimi", FORMATS["kimi_k2"])
    for flag, check in (("kimi_k2", "id"), ("pythonic", "refused")):
        s = ServerProcess(kimi, "--kv-cache-memory", str(64 << 20), "--tool-call-parser", flag)
        try:
            status, r = _post(s, {"model": "tiny", "messages": QUESTION, "tools": TOOLS, "tool_choice": NAMED,
                                  "max_tokens": 200, "temperature": 1.0, "seed": 3})
        finally:
            # Not asserted 0: a server stopped this soon after it started sometimes dies of the SIGTERM itself
            # (OpenBLAS's thread, started before main blocks the signal, can take it), whatever the flags.
            s.stop()
        if check == "refused":
            assert status == 400 and "pythonic" in r["error"]["message"], r
        else:
            c = r["choices"][0]
            assert status == 200 and (c["finish_reason"] == "length" or
                                      c["message"]["tool_calls"][0]["id"] == "functions.get_weather:0"), r
    ds = _checkpoint(tmp_path / "ds31", FORMATS["deepseek_v31"])
    r = subprocess.run([CLI, "serve", "-m", ds, "--port", "0", "--tool-call-parser", "deepseek_v31"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--tool-call-parser deepseek_v31" in r.stderr and ds in r.stderr, r.stderr
