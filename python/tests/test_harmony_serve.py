"""gpt-oss's harmony format through `attnzoo serve` and `attnzoo chat`: a tiny random gpt-oss (transformers'
GptOssForCausalLM from a config) with gpt-oss's published chat template and a byte-level BPE vocabulary that holds
harmony's special tokens (<|start|>, <|channel|>, <|message|>, <|end|>, <|return|>, <|call|>, <|constrain|>).

- Prompts: conversations with tools, an assistant turn carrying reasoning_content and a tool call, and a tool
  result render as transformers' apply_chat_template(messages with "thinking", tools=...) renders them: same prompt
  length and the same first-token log-probabilities as the transformers model on transformers' ids.
- Auto answers: logit_bias makes the markers likely at temperature 1, so over the seeds answers open, close, cut and
  address messages at random. The raw text of each answer (its logprobs' tokens, special tokens included) is read
  by `_read` below, an independent Python rewrite of the rules in docs/REASONING.md, and must equal the message's
  reasoning_content / content / tool_calls, whole and streamed (a streamed call's deltas joined by index; a call cut
  by max_tokens stays announced in the stream, its body content as well). openai-harmony's own parser checks that rewrite on
  fixed answers where it is installed and can load its o200k vocabulary (it downloads it at first use: skipped
  offline).
- Forced answers: a named tool_choice gives a call of that function whose arguments validate against its
  parameters (test_json_schema's validator), streamed as an announcement and then argument deltas that join to the
  whole answer's arguments byte for byte; response_format gives a final-channel JSON answer; "required" over two
  tools is a 400 naming tool_choice.
- `attnzoo chat` and `attnzoo generate --chat` on a model tweaked to open an analysis channel greedily print the
  final answer, with --hide-thinking without the analysis; Python's Model.chat returns the final answer with the
  analysis as its reasoning_content, and streams the answer only."""
import json
import os
import re
import subprocess

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from test_chat_cli import CLI, chat_cli_answer, needs_cli  # noqa: E402
from test_json_schema import valid  # noqa: E402

pytestmark = needs_cli
HERE = os.path.dirname(__file__)
TEMPLATE = open(os.path.join(HERE, "data", "chat_templates", "openai-gpt-oss-120b.jinja")).read()
HARMONY = ["<|endoftext|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>",
           "<|call|>"]
WORDS = ["analysis", "final", "commentary", "assistant", " to=functions.get_weather", " to=functions.get_time",
         " json"]
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                            "unit": {"enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"]}
TIME = {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 8}}, "required": ["zone"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "Time in a zone", "parameters": TIME}}]
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
SEEDS = 24


def _tokenizer():
    from tokenizers import AddedToken, decoders, models, pre_tokenizers, trainers
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    # Printable ASCII, space and newline only (byte-level spellings): every token is whole characters, so an
    # answer's text is its logprobs' tokens joined, and JSON can still be written.
    ascii_ = [chr(c) for c in range(0x21, 0x7f)] + ["\u0120", "\u010a"]
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=HARMONY, show_progress=False,
                                  limit_alphabet=len(ascii_), initial_alphabet=ascii_)
    system = TEMPLATE + "You are ChatGPT, a large language model trained by OpenAI. Knowledge cutoff Reasoning medium"
    tok.train_from_iterator([system, json.dumps(TOOLS), "the weather in Paris is sunny, 20 celsius"] * 20, trainer)
    # Single tokens for the words of a header, so that logit_bias can make whole headers likely.
    tok.add_tokens([AddedToken(w, special=False, normalized=False) for w in WORDS])
    return tok


def _ids(tok, name):
    i = tok.token_to_id(name)
    assert i is not None, name
    return i


def _checkpoint(path, tweak=None):
    from transformers import GptOssConfig, GptOssForCausalLM
    tok = _tokenizer()
    torch.manual_seed(7)
    cfg = GptOssConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, head_dim=16, intermediate_size=32,
                       num_local_experts=4, num_experts_per_tok=2, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, sliding_window=8, max_position_embeddings=4096, rms_norm_eps=1e-5,
                       initializer_range=0.1, tie_word_embeddings=False,
                       # <|return|> only: the server must add <|call|> as an end of turn itself.
                       eos_token_id=_ids(tok, "<|return|>"), pad_token_id=_ids(tok, "<|endoftext|>"),
                       bos_token_id=_ids(tok, "<|endoftext|>"))
    model = GptOssForCausalLM._from_config(cfg, attn_implementation="eager").eval()
    if tweak:
        tweak(model, tok)
    model.save_pretrained(path)
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": TEMPLATE, "eos_token": "<|return|>", "pad_token": "<|endoftext|>",
                   "tokenizer_class": "PreTrainedTokenizerFast"}, f)
    return str(path), tok, model


def _header_bigrams(model, tok):
    """The residual stream still holds the current token's embedding, so adding it to the next token's lm_head row
    makes that token likelier right after: <|channel|> -> analysis -> <|message|>, a recipient -> (json ->)
    <|message|>, which a random model (even under logit_bias) almost never writes in a row."""
    emb, head = model.model.embed_tokens.weight, model.lm_head.weight
    with torch.no_grad():
        for prev, nxt in (("<|channel|>", "analysis"), ("analysis", "<|message|>"),
                          (" to=functions.get_weather", " json"), (" json", "<|message|>"),
                          (" to=functions.get_time", "<|message|>")):
            e = emb[_ids(tok, prev)]
            head[_ids(tok, nxt)] += 1.5 * e / e.norm()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return _checkpoint(tmp_path_factory.mktemp("harmony_gpt_oss"), tweak=_header_bigrams)


@pytest.fixture(scope="module")
def server(checkpoint):
    from test_serve import ServerProcess
    s = ServerProcess(checkpoint[0], "--kv-cache-memory", str(64 << 20))
    yield s
    assert s.stop() == 0


MARK = re.compile(r"(<\|start\|>|<\|message\|>|<\|end\|>|<\|return\|>|<\|call\|>)")


def _read(text, stopped, read_calls=True):
    """(reasoning or None, content, [(name, arguments)]) of a harmony answer, docs/REASONING.md's rules written
    again: a header runs to <|message|> (the first has no role), a body to <|end|> / <|return|> / <|call|> /
    <|start|>; to=functions.X is a call, analysis is reasoning, another recipient or role is dropped, the rest is
    content; messages of one field join with newlines; words outside messages are content; a cut call is content."""
    reasoning, content, calls = [], [], []
    parts = MARK.split(text)
    header, has_role, body, in_body = "", False, "", False

    def close(whole):
        nonlocal in_body, has_role
        in_body, has_role = False, False
        kind, name, ctype = state["kind"], state["name"], state["ctype"]
        if kind == "reasoning":
            reasoning.append(body)
        elif kind == "content":
            content.append(body)
        elif kind == "call":
            if not whole:
                content.append(body)
            else:
                calls.append((name, body))  # as written, JSON or not (what the stream sends)

    def stray(s):
        if s.strip() and "<|" not in s:
            content.append(s)

    state = {}
    for i, p in enumerate(parts):
        is_mark = i % 2 == 1
        if not in_body:
            if not is_mark:
                header += p
                continue
            if p == "<|message|>":
                h = header
                role = "assistant"
                if has_role:
                    m = re.match(r"\s*((?:(?!<\|)\S)*)", h)
                    role, h = m.group(1) or "assistant", h[m.end():]
                words = [w for w in re.findall(r"<\|.*?(?:\|>|$)|(?:(?!<\|)\S)+", h)
                         if not w.startswith("<|") or w in ("<|channel|>", "<|constrain|>")]
                channel, recipient, ctype, nxt = "", "", "", "word"
                for w in words:
                    if w == "<|channel|>":
                        nxt = "channel"
                    elif w == "<|constrain|>":
                        nxt = "ctype"
                    elif w.startswith("to="):
                        recipient, nxt = w[3:], "word"
                    elif nxt == "channel":
                        channel, nxt = w, "word"
                    elif nxt == "ctype" or not ctype:
                        ctype, nxt = w, "word"
                fn = recipient.startswith("functions.") and len(recipient) > len("functions.")
                if role != "assistant":
                    kind = "drop"
                elif fn and read_calls:
                    kind = "call"
                elif channel == "analysis":
                    kind = "reasoning"
                elif recipient and not fn:
                    kind = "drop"
                else:
                    kind = "content"
                state = {"kind": kind, "name": recipient[len("functions."):], "ctype": ctype}
                in_body, body, header = True, "", ""
            else:
                if not has_role:
                    stray(header)
                header, has_role = "", p == "<|start|>"
            continue
        if not is_mark or p == "<|message|>":  # inside a body, <|message|> is text
            body += p
            continue
        close(True)
        has_role = p == "<|start|>"
    if in_body:
        close(stopped)
    elif not has_role:
        stray(header)
    return ("\n".join(reasoning) if reasoning else None), "\n".join(content), calls


def _hf_messages(messages):
    """The server's conversation as transformers' template takes it: thinking, argument objects, no null content."""
    out = []
    for m in messages:
        m = dict(m)
        if "reasoning_content" in m:
            m["thinking"] = m.pop("reasoning_content")
        if m.get("tool_calls"):
            m["tool_calls"] = [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                               for c in m["tool_calls"]]
            if m.get("content") is None:
                m.pop("content", None)
        out.append(m)
    return out


def _bias(tok):
    strength = {"<|channel|>": 6, "analysis": 6, "final": 4, "<|message|>": 6, "<|end|>": 3, "<|start|>": 3,
                "<|call|>": 2, "<|constrain|>": 2, " to=functions.get_weather": 5, " to=functions.get_time": 5}
    return {str(_ids(tok, t)): strength.get(t, 3) for t in [*strength, *WORDS]}


def _raw(choice, stops):
    tokens = [t.token for t in choice.logprobs.content]
    if tokens and tokens[-1] in stops:
        tokens = tokens[:-1]
    return "".join(tokens)


def _join_calls(calls, deltas, fragments=None):
    """Adds a chunk's tool_calls deltas to `calls` [(name, arguments)] as clients join them: the first delta of a
    call (index, id, name) opens it, later ones add argument text; `fragments` counts each call's deltas."""
    for d in deltas or []:
        if d.id:
            assert d.index == len(calls) and d.function.name, d
            calls.append((d.function.name, d.function.arguments or ""))
        else:
            assert d.index < len(calls) and not d.function.name and d.function.arguments, d
            calls[d.index] = (calls[d.index][0], calls[d.index][1] + d.function.arguments)
        if fragments is not None:
            fragments[d.index] = fragments.get(d.index, 0) + 1


def _streamed(client, fragments=None, **kw):
    reasoning, content, calls, reason = "", "", [], None
    for chunk in client.chat.completions.create(stream=True, **kw):
        for ch in chunk.choices:
            reasoning += getattr(ch.delta, "reasoning_content", None) or ""
            content += ch.delta.content or ""
            _join_calls(calls, ch.delta.tool_calls, fragments)
            reason = ch.finish_reason or reason
    return reasoning, content, calls, reason


def test_reader_rules_on_fixed_texts():
    """The Python rewrite on the texts the C++ tests use, so both spell the same rules."""
    assert _read("<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final<|message|>4", True) == \
        ("hm", "4", [])
    assert _read("<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{\"a\": 1}", True) == \
        (None, "", [("f", '{"a": 1}')])
    assert _read("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": ", False) == \
        (None, '{"a": ', [])
    assert _read("<|channel|>analysis<|message|>t<|end|>stray<|start|>assistant<|channel|>final<|message|>x", True) \
        == ("t", "stray\nx", [])


def _streamed_n(client, n, **kw):
    """Per choice: (reasoning, content, calls, finish_reason) gathered from the stream's deltas."""
    out = [["", "", [], None] for _ in range(n)]
    for chunk in client.chat.completions.create(stream=True, n=n, **kw):
        for ch in chunk.choices:
            o = out[ch.index]
            o[0] += getattr(ch.delta, "reasoning_content", None) or ""
            o[1] += ch.delta.content or ""
            _join_calls(o[2], ch.delta.tool_calls)
            o[3] = ch.finish_reason or o[3]
    return [tuple(o) for o in out]


FIXED = [
    "<|channel|>analysis<|message|>User asks 2+2.<|end|><|start|>assistant<|channel|>final<|message|>4",
    "<|channel|>analysis<|message|>Need it.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
    "<|constrain|>json<|message|>{\"city\": \"Paris\"}",
    "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant to=functions.f<|channel|>commentary json"
    "<|message|>{\"a\": 1}<|call|>",
    "<|channel|>analysis<|message|>one<|end|><|start|>assistant<|channel|>analysis<|message|>two<|end|>"
    "<|start|>assistant<|channel|>final<|message|>ans"]


def test_rewrite_agrees_with_openai_harmony():
    """openai-harmony's own StreamableParser (vLLM's reader) on well-formed answers gives the fields `_read` gives.
    Skipped where openai-harmony is not installed or cannot load its o200k vocabulary (it downloads it at first use)."""
    oh = pytest.importorskip("openai_harmony")
    try:
        enc = oh.load_harmony_encoding(oh.HarmonyEncodingName.HARMONY_GPT_OSS)
    except Exception as e:  # noqa: BLE001 - HarmonyError when the vocabulary cannot be fetched
        pytest.skip(f"openai-harmony cannot load its encoding here: {e}")
    for text in FIXED:
        parser = oh.StreamableParser(enc, role=oh.Role.ASSISTANT)
        for t in enc.encode(text, allowed_special="all"):
            parser.process(t)
        reasoning, content, calls = [], [], []
        for m in parser.messages:
            body = m.content[0].text if m.content else ""
            if m.recipient and m.recipient.startswith("functions."):
                calls.append((m.recipient[len("functions."):], body))
            elif m.channel == "analysis":
                reasoning.append(body)
            elif m.channel in ("final", "commentary"):
                content.append(body)
        if parser.current_content:  # the open last message (the stop token was not part of the text)
            if parser.current_recipient and parser.current_recipient.startswith("functions."):
                calls.append((parser.current_recipient[len("functions."):], parser.current_content))
            elif parser.current_channel == "analysis":
                reasoning.append(parser.current_content)
            else:
                content.append(parser.current_content)
        want = ("\n".join(reasoning) if reasoning else None, "\n".join(content), calls)
        assert _read(text, True) == want, text


def test_auto_answers_read_as_the_rules_say(checkpoint, server):
    pytest.importorskip("openai")
    path, tok, _ = checkpoint
    client = server.client()
    stops = {"<|return|>", "<|call|>"}
    seen = set()

    def covered():  # the reader's paths: reasoning, content, calls, answers stopped and cut
        return all(any(s[k] for s in seen) for k in range(4)) and any(not s[3] for s in seen)
    # Stops are rare in a random model's answers, and a call needs its header and a stop (the bias makes the header
    # likelier); which seeds reach one depends on the CPU's rounding (the prompt route, the batch): past SEEDS, more
    # seeds run until every path has been seen, up to eight times as many (a few seconds).
    for seed in range(8 * SEEDS):
        if seed >= SEEDS and covered():
            break
        n = 4
        kw = dict(model="tiny", messages=QUESTION, tools=TOOLS, max_tokens=6 + seed % 6 * 5, temperature=1.0,
                  seed=seed, logit_bias=_bias(tok))
        streamed = _streamed_n(client, n, **kw)
        for c in client.chat.completions.create(logprobs=True, n=n, **kw).choices:
            text = _raw(c, stops)
            stopped = c.finish_reason in ("stop", "tool_calls")
            reasoning, content, calls = _read(text, stopped)
            assert getattr(c.message, "reasoning_content", None) == reasoning, (seed, text)
            assert c.message.content == (content or None), (seed, text)
            got = [(t.function.name, t.function.arguments) for t in c.message.tool_calls or []]
            assert got == calls, (seed, text)
            assert c.finish_reason == ("tool_calls" if calls and stopped else "stop" if stopped else "length"), seed
            seen.add((reasoning is not None, bool(content), bool(calls), stopped))
            # A call cut by max_tokens was announced as it began (as vLLM streams it): the stream keeps it, with the
            # arguments written so far, and its body follows as content.
            cut = _read(text, True)[2][len(calls):] if not stopped else []
            assert streamed[c.index] == (reasoning or "", content, calls + cut, c.finish_reason), (seed, text)
    assert covered(), seen


def test_prompts_render_as_transformers(checkpoint, server):
    """An assistant turn that thought and called a tool, and the tool's result, go back through the template as
    transformers renders them; the first token's log-probabilities equal the transformers model's on its ids."""
    pytest.importorskip("openai")
    from transformers import AutoTokenizer
    path, tok, model = checkpoint
    hf = AutoTokenizer.from_pretrained(path)
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris", "unit": "celsius"})}}
    conversations = [
        (QUESTION, None),
        (QUESTION, TOOLS),
        ([{"role": "system", "content": "Be brief."}, *QUESTION,
          {"role": "assistant", "content": None, "reasoning_content": "Look it up.", "tool_calls": [call]},
          {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 20"}], TOOLS),
        ([*QUESTION, {"role": "assistant", "content": "Sunny.", "reasoning_content": "Easy."},
          {"role": "user", "content": "And tomorrow?"}], None)]
    client = server.client()
    for messages, tools in conversations:
        ids = hf.apply_chat_template(_hf_messages(messages), tools=tools, add_generation_prompt=True, tokenize=True,
                                     return_dict=False)
        kw = dict(tools=tools) if tools else {}
        r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=1, temperature=0,
                                           logprobs=True, top_logprobs=5, **kw)
        assert r.usage.prompt_tokens == len(ids), (messages, r.usage.prompt_tokens, len(ids))
        with torch.no_grad():
            want = torch.log_softmax(model(torch.tensor([ids])).logits[0, -1].double(), -1)
        top = r.choices[0].logprobs.content[0].top_logprobs
        for alt in top:
            i = tok.token_to_id(alt.token)
            if i is None:
                continue  # a byte-level piece whose text is not its vocabulary spelling
            assert abs(alt.logprob - want[i].item()) < 2e-4, (alt.token, alt.logprob, want[i].item())
    # The template refuses channel tags in content, as transformers' does: a 400 naming messages.
    import openai
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="tiny", max_tokens=1, messages=[
            *QUESTION, {"role": "assistant", "content": "<|channel|>final<|message|>x"}, *QUESTION])
    assert "messages" in str(e.value)


def test_forced_calls_and_schema_answers(checkpoint, server):
    pytest.importorskip("openai")
    import openai
    client = server.client()
    named = {"type": "function", "function": {"name": "get_weather"}}
    made = fragmented = 0
    for seed in range(12):
        kw = dict(model="tiny", messages=QUESTION, tools=TOOLS, tool_choice=named, max_tokens=120, temperature=1.0,
                  seed=seed)
        c = client.chat.completions.create(**kw).choices[0]
        if c.finish_reason == "length":
            assert not c.message.tool_calls and c.message.content  # cut: the arguments come back as content
            continue
        assert c.finish_reason == "tool_calls" and c.message.content is None, c
        (call,) = c.message.tool_calls
        assert call.function.name == "get_weather" and call.id.startswith("call_")
        args = json.loads(call.function.arguments)
        assert valid(args, WEATHER, WEATHER), args
        assert getattr(c.message, "reasoning_content", None) is None
        fragments = {}
        _, content, calls, reason = _streamed(client, fragments, **kw)
        assert (content, reason) == ("", "tool_calls") and calls == [("get_weather", call.function.arguments)]
        fragmented += fragments[0] >= 3  # announced, then the arguments in two deltas or more
        made += 1
    assert made >= 6, made
    assert fragmented >= made // 2, (fragmented, made)
    schema = {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}
    answered = 0
    for seed in range(4):
        c = client.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=60, temperature=1.0, seed=seed,
                                           response_format={"type": "json_schema",
                                                            "json_schema": {"name": "s", "schema": schema}}).choices[0]
        if c.finish_reason == "length":
            continue
        assert valid(json.loads(c.message.content), schema, schema), c.message.content
        assert getattr(c.message, "reasoning_content", None) is None
        answered += 1
    assert answered >= 2, answered
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="tiny", messages=QUESTION, tools=TOOLS, tool_choice="required")
    assert "tool_choice" in str(e.value) and "required" in str(e.value)


def test_flags_accepted_and_refused(checkpoint, tmp_path):
    from test_serve import ServerProcess
    s = ServerProcess(checkpoint[0], "--kv-cache-memory", str(64 << 20), "--reasoning-parser", "openai_gptoss",
                      "--tool-call-parser", "openai")
    assert s.stop() == 0
    # A model whose template and vocabulary know no <|channel|>.
    chatml = tmp_path / "chatml"
    path, tok, model = checkpoint
    os.makedirs(chatml)
    for f in os.listdir(path):
        if f != "tokenizer_config.json" and f != "tokenizer.json":
            os.symlink(os.path.join(path, f), chatml / f)
    from tokenizers import models, pre_tokenizers, decoders
    plain = tokenizers.Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(pre_tokenizers.ByteLevel.alphabet())},
                                            merges=[]))
    plain.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    plain.decoder = decoders.ByteLevel()
    plain.save(str(chatml / "tokenizer.json"))
    with open(chatml / "tokenizer_config.json", "w") as f:
        json.dump({"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}, f)
    r = subprocess.run([CLI, "serve", "-m", str(chatml), "--port", "0", "--reasoning-parser", "openai_gptoss"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--reasoning-parser openai_gptoss" in r.stderr and "<|channel|>" in r.stderr, r.stderr


def _opens_analysis_greedily(model, tok):
    """<|channel|>, analysis and <|message|> take over the rows of the first three greedy tokens and <|end|> that of
    the seventh: the greedy answer is an analysis message, then words outside any message (content)."""
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
        hf_ids = None
        for tag, at in (("<|channel|>", 1), ("analysis", 2), ("<|message|>", 3), ("<|end|>", 7)):
            if hf_ids is None:
                from transformers import PreTrainedTokenizerFast
                hf = PreTrainedTokenizerFast(tokenizer_object=tok)
                hf_ids = hf.apply_chat_template(QUESTION, chat_template=TEMPLATE, add_generation_prompt=True,
                                                tokenize=True, return_dict=False)
            out = model.generate(torch.tensor([hf_ids]), do_sample=False, max_new_tokens=at, pad_token_id=0,
                                 eos_token_id=None)
            won = out[0, -1].item()
            model.lm_head.weight[_ids(tok, tag)] = model.lm_head.weight[won] * 1.05


def test_chat_shows_the_final_channel(tmp_path):
    path, tok, _ = _checkpoint(tmp_path / "greedy", tweak=_opens_analysis_greedily)
    from test_serve import ServerProcess
    s = ServerProcess(path, "--kv-cache-memory", str(64 << 20))
    try:
        c = s.client().chat.completions.create(model="tiny", messages=QUESTION, max_tokens=16, temperature=0,
                                               logprobs=True).choices[0]
    finally:
        assert s.stop() == 0
    text = _raw(c, {"<|return|>", "<|call|>"})
    assert text.startswith("<|channel|>analysis<|message|>"), text  # the tweak worked
    reasoning, content, _ = _read(text, c.finish_reason == "stop", read_calls=False)
    assert reasoning and content, text  # both fields to tell apart
    assert (c.message.reasoning_content, c.message.content or "") == (reasoning, content)

    def answer(*flags):
        return chat_cli_answer(path, QUESTION[0]["content"], *flags)

    assert answer("--hide-thinking") == content
    assert answer() == reasoning + content  # not a terminal: no escape codes
    assert answer("--reasoning-parser", "openai_gptoss") == reasoning + content

    def generated(*flags):
        r = subprocess.run([CLI, "generate", "-m", path, "--chat", "-p", QUESTION[0]["content"], "--temperature", "0",
                            "-n", "16", *flags], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout

    assert generated() == reasoning + content + "\n"
    assert generated("--hide-thinking") == content + "\n"

    import attnzoo
    m = attnzoo.Model.load(path)
    pieces = []
    reply = m.chat(QUESTION, max_new_tokens=16, stream=pieces.append)
    assert (str(reply), reply.reasoning_content) == (content, reasoning)
    assert "".join(pieces) == content
    # The reply and its reasoning go back into the template as transformers renders an assistant turn's thinking.
    turns = QUESTION + [{"role": "assistant", "content": reply, "reasoning_content": reply.reasoning_content},
                        {"role": "user", "content": "And in Rome?"}]
    from transformers import PreTrainedTokenizerFast
    hf = PreTrainedTokenizerFast(tokenizer_object=tok)
    assert m.apply_chat_template(turns, add_generation_prompt=True) == hf.apply_chat_template(
        _hf_messages(turns), chat_template=TEMPLATE, add_generation_prompt=True, tokenize=False)


def test_chat_refuses_thinking_flags_it_cannot_honour(tmp_path, checkpoint):
    """generate's --hide-thinking / --reasoning-parser need --chat; a plain model has no thinking to hide."""
    for flags in (["--hide-thinking"], ["--reasoning-parser", "qwen3"]):
        r = subprocess.run([CLI, "generate", "-m", checkpoint[0], "-p", "hi", "-n", "2", *flags],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and f"{flags[0]} needs --chat" in r.stderr, r.stderr
