"""Chat with a checkpoint: Model.apply_chat_template / Model.chat, `attnzoo generate --chat` and the interactive
`attnzoo chat`, driven through tmux as a person would (type a question, read the streamed answer, /reset, Ctrl-C).

The checkpoint is a tiny random Llama (transformers from_config + save_pretrained) with a byte-level BPE
tokenizer trained here and a tokenizer_config.json holding a ChatML template. Its lm_head row for <|im_end|> is
set to a scaled copy of one ordinary token's row, so greedy answers end at the template's end-of-turn token after
a few tokens, and the references are transformers' greedy generate on the same templated prompt.

The CLI binary is $ATTNZOO_CLI, else build/attnzoo of this checkout."""
import json
import os
import shutil
import subprocess
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

import attnzoo  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("ATTNZOO_CLI", os.path.join(ROOT, "build", "attnzoo"))
needs_cli = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"attnzoo CLI not built at {CLI}")
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (scripts/setup.sh)")

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>'"
          " + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
SPECIALS = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
IM_END, EOS = 4, 2
QUESTION = "the quick brown fox"


def _tokenizer():
    """Byte-level BPE whose alphabet is only the characters of its training text (no control bytes, no '>'), so
    whatever a random model says stays legible in a terminal and never looks like the chat prompt."""
    from tokenizers import decoders, models, pre_tokenizers, trainers
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=SPECIALS, show_progress=False)
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog.\nhello world, user assistant"] * 50,
                            trainer)
    return tok


def _hf_greedy_until(model, ids, stop_ids, n):
    out = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=n, eos_token_id=list(stop_ids),
                         pad_token_id=0)
    new = out[0, len(ids):].tolist()
    return new[:-1] if new and new[-1] in stop_ids else new


def _write_checkpoint(directory, model, tok, template=CHATML, eos_token="</s>"):
    model.save_pretrained(directory)
    tok.save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": template, "bos_token": "<s>", "eos_token": eos_token,
                   "tokenizer_class": "PreTrainedTokenizerFast"}, f)


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM
    tok = _tokenizer()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      bos_token_id=1, eos_token_id=EOS, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)
        # <|im_end|> takes over the row of the token the first answer would say third, scaled up a little: greedy
        # answers end at the template's end-of-turn token after a few words instead of running to the limit.
        prompt = tok.encode(attnzoo.apply_chat_template(CHATML, [{"role": "user", "content": QUESTION}], True),
                            add_special_tokens=False).ids
        third = _hf_greedy_until(model, prompt, {EOS, IM_END}, 3)[-1]
        model.lm_head.weight[IM_END] = model.lm_head.weight[third] * 1.02
    path = tmp_path_factory.mktemp("chat_llama")
    _write_checkpoint(path, model, tok)
    return model, str(path), tok


def test_checkpoint_template_and_special_tokens(chat_model):
    _, path, tok = chat_model
    m = attnzoo.Model.load(path)
    source, special = m.chat_template
    assert source == CHATML and special == {"bos_token": "<s>", "eos_token": "</s>"}
    messages = [{"role": "user", "content": QUESTION}]
    text = m.apply_chat_template(messages, add_generation_prompt=True)
    assert text == f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    assert m.apply_chat_template(messages, add_generation_prompt=True, tokenize=True) == tok.encode(
        text, add_special_tokens=False).ids
    assert attnzoo._core.end_of_turn_ids(source, special, m.tokenizer._native) == [IM_END]


def test_model_templates_match_transformers_tokenizer(chat_model, tmp_path):
    """Which template a directory yields (string, named list, chat_template.jinja, additional_chat_templates/) and
    the text and ids it renders, against transformers' own tokenizer loaded from the same directory."""
    from transformers import AutoTokenizer
    _, path, tok = chat_model
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": QUESTION}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    named = [{"name": "tool_use", "template": "TOOLS {{ tools | tojson }} " + CHATML},
             {"name": "default", "template": "{{ bos_token }}" + CHATML}]
    layouts = {
        "string": {"tokenizer_config.json": {"chat_template": CHATML}},
        "named": {"tokenizer_config.json": {"chat_template": named}},
        "jinja_files": {"tokenizer_config.json": {"chat_template": "IGNORED"}, "chat_template.jinja": "J " + CHATML,
                        "additional_chat_templates/tool_use.jinja": "TJ {{ eos_token }} " + CHATML},
    }
    for name, files in layouts.items():
        d = tmp_path / name
        (d / "additional_chat_templates").mkdir(parents=True)
        shutil.copy(os.path.join(path, "config.json"), d)
        shutil.copy(os.path.join(path, "model.safetensors"), d)
        tok.save(str(d / "tokenizer.json"))
        for f, content in files.items():
            if f == "tokenizer_config.json":
                content = {**content, "bos_token": "<s>", "eos_token": "</s>", "tokenizer_class": "PreTrainedTokenizerFast"}
                (d / f).write_text(json.dumps(content))
            else:
                (d / f).write_text(content)
        ref = AutoTokenizer.from_pretrained(str(d))
        m = attnzoo.Model.load(d)
        for kw in ({}, {"tools": tools}):
            want = ref.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kw)
            assert m.apply_chat_template(messages, add_generation_prompt=True, **kw) == want, (name, kw)
            want_ids = ref.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, **kw)
            if hasattr(want_ids, "keys"):  # a BatchEncoding
                want_ids = want_ids["input_ids"]
            assert m.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, **kw) == list(want_ids)


def _reference_answer(chat_model, messages, n=40):
    model, _, tok = chat_model
    text = attnzoo.apply_chat_template(CHATML, messages, add_generation_prompt=True)
    ids = tok.encode(text, add_special_tokens=False).ids
    return tok.decode(_hf_greedy_until(model, ids, {EOS, IM_END}, n), skip_special_tokens=True)


def test_model_chat_matches_transformers(chat_model):
    _, path, _ = chat_model
    m = attnzoo.Model.load(path)
    messages = [{"role": "user", "content": QUESTION}]
    want = _reference_answer(chat_model, messages)
    pieces = []
    got = m.chat(messages, max_new_tokens=40, stream=pieces.append)
    assert got == want and "".join(pieces) == got
    assert isinstance(got, str) and got.reasoning_content is None  # ChatML has no channels to read
    assert 0 < len(got.split()) < 30  # ended at <|im_end|>, not at the length limit
    two_turns = messages + [{"role": "assistant", "content": got}, {"role": "user", "content": "hello world"}]
    assert m.chat(two_turns, max_new_tokens=40) == _reference_answer(chat_model, two_turns)


@needs_cli
def test_generate_chat_flag(chat_model):
    _, path, _ = chat_model
    r = subprocess.run([CLI, "generate", "-m", path, "--chat", "-p", QUESTION, "-n", "40"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == _reference_answer(chat_model, [{"role": "user", "content": QUESTION}]) + "\n"
    assert "stop: eos" in r.stderr
    r = subprocess.run([CLI, "generate", "-m", path, "--system", "x", "-p", "q"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "--system needs --chat" in r.stderr


@needs_cli
def test_generate_memory_pool_flags(chat_model):
    """--kv-cache-dtype / --block-size / --kv-cache-memory reach the pool: an f32 cache in odd-sized blocks answers
    as the default does, a budget too small for the prompt is the pool's named error, bad values name the flag."""
    _, path, _ = chat_model
    args = [CLI, "generate", "-m", path, "--chat", "-p", QUESTION, "-n", "40"]
    r = subprocess.run(args + ["--kv-cache-dtype", "float32", "--block-size", "7", "--kv-cache-memory", "64M"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == _reference_answer(chat_model, [{"role": "user", "content": QUESTION}]) + "\n"
    r = subprocess.run(args + ["--kv-cache-memory", "1K"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "block" in r.stderr
    for kind in ("int8", "fp8"):  # quantized caches: an answer, not necessarily the f32 one word for word
        r = subprocess.run(args + ["--kv-cache-dtype", kind], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout.strip(), (kind, r.stderr)
    for flag, value in [("--kv-cache-memory", "12Q"), ("--kv-cache-memory", "-1G"), ("--block-size", "0"),
                        ("--kv-cache-dtype", "int4")]:
        r = subprocess.run(args + [flag, value], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and flag.lstrip("-").replace("-", "_") in r.stderr.replace("-", "_"), (flag, r.stderr)


class Tmux:
    """One tmux server of our own (its own socket) running one command in a wide pane."""

    def __init__(self, command, name):
        self.socket = f"attnzoo-test-{os.getpid()}-{name}"
        self.target = name
        self._tmux("new-session", "-d", "-s", name, "-x", "220", "-y", "50", command)
        self._tmux("set-option", "-t", name, "remain-on-exit", "on")

    def _tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30)

    def send(self, *keys):
        self._tmux("send-keys", "-t", self.target, *keys)

    def screen(self):
        """The whole pane history, wrapped lines joined, trailing blanks dropped."""
        text = self._tmux("capture-pane", "-p", "-J", "-S", "-", "-t", self.target).stdout
        return "\n".join(line.rstrip() for line in text.splitlines()).rstrip()

    def dead(self):
        return self._tmux("display-message", "-p", "-t", self.target, "#{pane_dead}").stdout.strip() == "1"

    def wait_for(self, predicate, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            s = self.screen()
            if predicate(s):
                return s
            time.sleep(0.1)
        raise AssertionError(f"timed out; the screen shows:\n{self.screen()}")

    def close(self):
        self._tmux("kill-server")


def chat_cli_answer(path, question, *flags, max_tokens=16):
    """The greedy answer `attnzoo chat` prints (not to a terminal) to one question, then /exit."""
    r = subprocess.run([CLI, "chat", "-m", path, "--temperature", "0", "-n", str(max_tokens), *flags],
                       input=question + "\n/exit\n", capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("> ") and r.stdout.endswith("\n> "), r.stdout
    return r.stdout[2:-3]


def _prompts(screen):
    return [line for line in screen.splitlines() if line.startswith(">")]


def _answer_after(screen, question):
    """The text printed between the line where `question` was typed and the next prompt."""
    lines = screen.splitlines()
    start = max(i for i, line in enumerate(lines) if line == f"> {question}")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(">"))
    return "\n".join(lines[start + 1:end])


def _idle(screen):
    """The program waits at an empty prompt."""
    return bool(screen) and screen.splitlines()[-1] == ">"


@needs_cli
@needs_tmux
def test_interactive_chat_in_tmux(chat_model):
    _, path, _ = chat_model
    t = Tmux(f"exec {CLI} chat -m {path} -n 40", "chat")
    try:
        t.wait_for(_idle)
        t.send(QUESTION, "Enter")
        s = t.wait_for(lambda s: len(_prompts(s)) == 2 and _idle(s))
        first = _answer_after(s, QUESTION)
        want = _reference_answer(chat_model, [{"role": "user", "content": QUESTION}])
        assert " ".join(first.split()) == " ".join(want.split())

        # The history is kept: the second answer continues the conversation.
        t.send("hello world", "Enter")
        s = t.wait_for(lambda s: len(_prompts(s)) == 3 and _idle(s))
        history = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": want},
                   {"role": "user", "content": "hello world"}]
        assert " ".join(_answer_after(s, "hello world").split()) == " ".join(
            _reference_answer(chat_model, history).split())

        # /reset forgets it: the same question gets the first answer again.
        t.send("/reset", "Enter")
        t.wait_for(lambda s: "[history cleared]" in s and _idle(s))
        t.send(QUESTION, "Enter")
        s = t.wait_for(lambda s: len(_prompts(s)) == 5 and _idle(s))
        assert _answer_after(s, QUESTION) == first

        t.send("/exit", "Enter")
        t.wait_for(lambda s: t.dead())
    finally:
        t.close()


@needs_cli
@needs_tmux
def test_ctrl_c_stops_the_answer_not_the_program(chat_model, tmp_path):
    model, _, tok = chat_model
    # No stop token at all (no EOS, and a template whose end-of-turn marker is plain text): the answer runs until
    # Ctrl-C stops it.
    path = str(tmp_path / "endless")
    model.generation_config.eos_token_id = None
    model.config.eos_token_id = None
    _write_checkpoint(path, model, tok, template=CHATML.replace("<|im_end|>", "[END]"), eos_token=None)
    t = Tmux(f"exec {CLI} chat -m {path} -n 100000000", "ctrlc")
    try:
        t.wait_for(_idle)
        t.send(QUESTION, "Enter")
        before = t.wait_for(lambda s: len(s) > 400, timeout=60)
        time.sleep(0.3)
        assert len(t.screen()) >= len(before)  # still streaming
        t.send("C-c")
        t.wait_for(lambda s: "[stopped]" in s and _idle(s))
        assert not t.dead()
        # The program is still there and answers again.
        t.send("/reset", "Enter")
        t.wait_for(lambda s: "[history cleared]" in s and _idle(s))
        # Ctrl-C once at the prompt warns; twice quits.
        t.send("C-c")
        t.wait_for(lambda s: "Ctrl-C again to quit" in s)
        assert not t.dead()
        t.send("C-c")
        t.wait_for(lambda s: t.dead())
    finally:
        t.close()


@needs_cli
def test_a_line_that_is_not_utf8_is_skipped_and_the_chat_goes_on(chat_model):
    """One bad line (a stray Latin-1 paste) is reported and dropped from the history; the next line is answered as
    if it had never been typed."""
    _, path, _ = chat_model
    flags = ["chat", "-m", path, "--temperature", "0", "-n", "16"]
    r = subprocess.run([CLI, *flags], input=f"{QUESTION}\n".encode(), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    want = r.stdout
    r = subprocess.run([CLI, *flags], input=f"ab \xff\xfe cd\n{QUESTION}\n".encode("latin-1"), capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert b"[attnzoo] that line: not valid UTF-8 (byte 3): skipped" in r.stderr, r.stderr
    assert r.stdout == b"> " + want, r.stdout
    r = subprocess.run([CLI, "chat", "-m", path, "--system", "\udcff"], input="", capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "--system: not valid UTF-8 (byte 0)" in r.stderr, r.stderr
