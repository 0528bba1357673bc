"""`attnzoo serve` driven by the official `openai` client, as users of vLLM's server drive it: completions and chat,
streamed and not, n > 1, stop strings, logprobs, 64 concurrent streams, and the faults a public server meets
(malformed and oversized bodies, over-long prompts, unknown models, clients that hang up mid-stream, a pool too
small for every request at once).

References: greedy (and seeded) outputs equal attnzoo's own single-sequence `Model.generate` / `Model.chat` on the
same checkpoint, which the model tests check against transformers; logprobs equal log_softmax of
`Model.forward`'s logits. The checkpoint is test_chat_cli's tiny random Llama with a trained byte-level BPE and a
ChatML template. Servers run on 127.0.0.1 with an ephemeral port and are stopped by the fixtures."""
import http.client
import json
import queue
import re
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
openai = pytest.importorskip("openai")
pytest.importorskip("tokenizers")

from attnzoo.model import Model  # noqa: E402
from test_chat_cli import CLI, EOS, _tokenizer, _write_checkpoint, needs_cli  # noqa: E402

pytestmark = needs_cli
MAX_LEN = 512


@pytest.fixture(scope="session")  # test_serve_http.py's servers load it too
def checkpoint(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM
    tok = _tokenizer()
    torch.manual_seed(1)
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=MAX_LEN,
                      bos_token_id=1, eos_token_id=EOS, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)  # peaked distributions: greedy answers are not ties between near-equal logits
    path = tmp_path_factory.mktemp("serve_llama")
    _write_checkpoint(path, model, tok)
    return str(path)


@pytest.fixture(scope="module")
def reference(checkpoint):
    return Model.load(checkpoint)


class ServerProcess:
    def __init__(self, directory, *extra):
        self.proc = subprocess.Popen([CLI, "serve", "-m", directory, "--port", "0", "--served-model-name", "tiny",
                                      *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                break
            if line is None:
                break
            if "listening on http://" in line:
                self.port = int(line.rsplit(":", 1)[1])
            if "ready" in line and self.port:
                self.url = f"http://127.0.0.1:{self.port}"
                return
        self.stop()
        raise RuntimeError("attnzoo serve did not become ready")

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def client(self):
        return openai.OpenAI(base_url=self.url + "/v1", api_key="none", max_retries=0, timeout=60)

    def raw(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.read().decode()
        finally:
            conn.close()

    def metrics(self):
        """{sample name with its labels other than model_name: value}, e.g. 'vllm:num_requests_running'."""
        status, text = self.raw("GET", "/metrics")
        assert status == 200
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                name = re.sub(r'\{?model_name="tiny",?', "{", name).replace("{}", "").replace("{{", "{")
                out[name] = float(value)
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="module")
def server(checkpoint):
    s = ServerProcess(checkpoint, "--max-num-seqs", "48", "--max-body-bytes", "65536", "--kv-cache-memory",
                      str(64 << 20))
    yield s
    assert s.stop() == 0


def _prompt(reference, n, seed):
    rng = np.random.default_rng(seed)
    return [int(t) for t in rng.integers(5, reference.vocab_size, n)]


def _in_threads(fn, count):
    """fn(0) ... fn(count - 1) at once, each on its own thread (the clients of a concurrency test)."""
    threads = [threading.Thread(target=fn, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)


def _text(reference, ids):
    return reference.tokenizer.decode([i for i in ids if i != EOS], skip_special_tokens=True)


def test_health_and_models(server):
    assert server.raw("GET", "/health")[0] == 200
    models = server.client().models.list().data
    assert [m.id for m in models] == ["tiny"]


def test_completion_greedy_equals_generate(server, reference):
    client = server.client()
    for seed, n in ((0, 7), (1, 30)):
        ids = _prompt(reference, n, seed)
        want = reference.generate(ids, max_new_tokens=20)
        r = client.completions.create(model="tiny", prompt=ids, max_tokens=20, temperature=0)
        assert r.choices[0].text == _text(reference, want)
        assert r.usage.prompt_tokens == n and r.usage.completion_tokens == len(want)
        assert r.choices[0].finish_reason == ("stop" if want[-1] == EOS else "length")
    text = "the quick brown fox jumps"
    r = client.completions.create(model="tiny", prompt=text, max_tokens=12, temperature=0)
    assert r.choices[0].text == reference.generate(text, max_new_tokens=12)


def test_streaming_completion_with_usage(server, reference):
    ids = _prompt(reference, 11, 2)
    want = reference.generate(ids, max_new_tokens=24)
    chunks = list(server.client().completions.create(model="tiny", prompt=ids, max_tokens=24, temperature=0,
                                                     stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == _text(reference, want)
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == len(want)
    assert chunks[-1].usage.prompt_tokens == 11
    assert all(c.usage is None for c in chunks[:-1])
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in ("stop", "length")


def test_chat_streamed_and_not_equals_model_chat(server, reference):
    messages = [{"role": "system", "content": "hello world"}, {"role": "user", "content": "the lazy dog"}]
    want = reference.chat(messages, max_new_tokens=16)
    client = server.client()
    r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=16, temperature=0)
    assert r.choices[0].message.role == "assistant" and r.choices[0].message.content == want
    stream = client.chat.completions.create(model="tiny", messages=messages, max_tokens=16, temperature=0,
                                            stream=True)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == want


def test_n_samples_with_seed_equal_seeded_generate(server, reference):
    ids = _prompt(reference, 9, 3)
    r = server.client().completions.create(model="tiny", prompt=ids, max_tokens=10, temperature=1.0, seed=7, n=3)
    got = sorted(r.choices, key=lambda c: c.index)
    assert [c.index for c in got] == [0, 1, 2]
    for i, c in enumerate(got):  # sample i draws from its own generator seeded with seed + i
        # The OpenAI API has no top-k unless asked; Model.generate follows transformers (top_k 50 by default).
        want = reference.generate(ids, max_new_tokens=10, temperature=1.0, top_k=0, seed=7 + i)
        assert c.text == _text(reference, want)
    assert len({c.text for c in got}) > 1


def test_stop_string_trims_the_text(server, reference):
    ids = _prompt(reference, 12, 4)
    full = _text(reference, reference.generate(ids, max_new_tokens=30))
    assert len(full) > 6
    stop = full[len(full) // 2:len(full) // 2 + 2]
    r = server.client().completions.create(model="tiny", prompt=ids, max_tokens=30, temperature=0, stop=[stop])
    assert r.choices[0].text == full[:full.index(stop)]
    assert r.choices[0].finish_reason == "stop"


def _log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def test_logprobs_equal_log_softmax_of_the_logits(server, reference):
    ids = _prompt(reference, 10, 5)
    want = reference.generate(ids, max_new_tokens=8)
    want = want[:-1] if want[-1] == EOS else want
    ref = _log_softmax(np.asarray(reference.forward(np.asarray(ids + want, dtype=np.int32))))
    r = server.client().completions.create(model="tiny", prompt=ids, max_tokens=len(want), temperature=0,
                                           logprobs=3)
    lp = r.choices[0].logprobs
    assert len(lp.token_logprobs) == len(want)
    for step, token in enumerate(want):
        row = ref[len(ids) - 1 + step]
        assert lp.token_logprobs[step] == pytest.approx(row[token], abs=1e-3)
        best = np.argsort(-row)[:3]
        assert sorted(lp.top_logprobs[step].values(), reverse=True) == pytest.approx(row[best], abs=1e-3)
    c = server.client().chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hello"}],
                                                max_tokens=4, temperature=0, logprobs=True, top_logprobs=2)
    content = c.choices[0].logprobs.content
    assert content and all(len(t.top_logprobs) == 2 and t.top_logprobs[0].logprob >= t.logprob - 1e-5
                           for t in content)


def test_64_concurrent_streams_equal_running_alone(server, reference):
    prompts = [_prompt(reference, 3 + (i * 37) % 120, 100 + i) for i in range(64)]
    wants = [_text(reference, reference.generate(p, max_new_tokens=16)) for p in prompts]
    got = [None] * len(prompts)

    def run(i):
        stream = server.client().completions.create(model="tiny", prompt=prompts[i], max_tokens=16, temperature=0,
                                                    stream=True)
        got[i] = "".join(c.choices[0].text for c in stream if c.choices)

    _in_threads(run, len(prompts))
    assert got == wants


def _error(status_body):
    status, body = status_body
    return status, json.loads(body)["error"]


def test_malformed_oversized_and_invalid_requests(server, reference):
    status, err = _error(server.raw("POST", "/v1/completions", '{"prompt": "a", ', {"Content-Type": "application/json"}))
    assert status == 400 and "JSON" in err["message"] and err["type"] == "invalid_request_error"
    status, err = _error(server.raw("POST", "/v1/completions", json.dumps({"prompt": "a" * 100000}),
                                    {"Content-Type": "application/json"}))
    assert status == 413 and "65536" in err["message"]
    client = server.client()
    with pytest.raises(openai.BadRequestError, match="500 tokens.*max_tokens 100"):
        client.completions.create(model="tiny", prompt=_prompt(reference, 500, 6), max_tokens=100)
    with pytest.raises(openai.NotFoundError, match="gpt-9"):
        client.completions.create(model="gpt-9", prompt="hello", max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="n: must be in"):
        client.completions.create(model="tiny", prompt="hello", max_tokens=2, n=1000)
    with pytest.raises(openai.BadRequestError, match="temperature"):
        client.completions.create(model="tiny", prompt="hello", max_tokens=2, temperature=-1)
    with pytest.raises(openai.BadRequestError, match="prompt"):
        client.completions.create(model="tiny", prompt=[reference.vocab_size + 5], max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="echo: not supported"):
        client.completions.create(model="tiny", prompt="hello", max_tokens=2, echo=True)
    assert server.raw("GET", "/health")[0] == 200  # the server lives on


@pytest.mark.parametrize("extra, param, message", [
    ({"stop": ["x"] * 17}, "stop", "at most 16 stop strings, got 17"),
    ({"stop": "x" * 257}, "stop", "at most 256 bytes, got 257"),
    ({"stop_token_ids": [7] * 257}, "stop_token_ids", "at most 256 ids, got 257"),
    ({"logit_bias": {"7": 100, "07": 100}}, "logit_bias", 'keys "07" and "7" both name token 7'),
])
def test_stop_and_logit_bias_past_their_bounds_are_400s_naming_the_field(server, extra, param, message):
    body = {"model": "tiny", "prompt": "hello", "max_tokens": 2, **extra}
    status, err = _error(server.raw("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"}))
    assert status == 400 and err["param"] == param and message in err["message"], err
    # At the bounds: served.
    r = server.client().completions.create(model="tiny", prompt="hello", max_tokens=2, stop=["x" * 256] * 16,
                                           extra_body={"stop_token_ids": [7] * 256})
    assert r.usage.completion_tokens >= 1


def test_request_limit_flags_set_the_bounds(checkpoint):
    s = ServerProcess(checkpoint, "--max-stop", "2", "--max-stop-bytes", "3", "--max-stop-token-ids", "1",
                      "--max-body-values", "0")
    try:
        for extra, param, message in [({"stop": ["a", "b", "c"]}, "stop", "at most 2 stop strings, got 3"),
                                      ({"stop": "abcd"}, "stop", "at most 3 bytes, got 4"),
                                      ({"stop_token_ids": [7, 8]}, "stop_token_ids", "at most 1 ids, got 2")]:
            body = {"model": "tiny", "prompt": "hello", "max_tokens": 2, **extra}
            status, err = _error(s.raw("POST", "/v1/completions", json.dumps(body),
                                       {"Content-Type": "application/json"}))
            assert status == 400 and err["param"] == param and message in err["message"], err
        # No values beyond the context's: a prompt of max_model_len ids plus a logit_bias is past the bound.
        body = {"model": "tiny", "prompt": list(range(1, MAX_LEN + 1)), "max_tokens": 1,
                "logit_bias": {str(i): 1 for i in range(40)}}
        status, text = s.raw("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        assert status == 400 and "values" in text, text
        r = s.client().completions.create(model="tiny", prompt="hello", max_tokens=2, stop=["abc", "d"])
        assert r.usage.completion_tokens >= 1
    finally:
        assert s.stop() == 0


def _idle_metrics(server):
    """/metrics once no request runs (earlier tests' requests may still be ending)."""
    deadline = time.time() + 20
    while server.metrics()["vllm:num_requests_running"] > 0 and time.time() < deadline:
        time.sleep(0.05)
    return server.metrics()


def _metrics_back_to(server, baseline):
    """/metrics once no request runs and the KV pool's usage is back to `baseline` (asserted, within 10 s)."""
    deadline = time.time() + 10
    while time.time() < deadline:
        m = server.metrics()
        if m["vllm:num_requests_running"] == 0 and m["vllm:kv_cache_usage_perc"] == baseline:
            break
        time.sleep(0.02)
    assert m["vllm:num_requests_running"] == 0
    assert m["vllm:kv_cache_usage_perc"] == baseline
    return m


def test_client_disconnect_frees_the_blocks(server, reference):
    before = _idle_metrics(server)
    baseline = before["vllm:kv_cache_usage_perc"]
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    body = {"model": "tiny", "prompt": _prompt(reference, 40, 7), "max_tokens": 400, "temperature": 0,
            "ignore_eos": True, "stream": True}
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    for _ in range(3):
        assert resp.readline().startswith(b"data:")
        resp.readline()
    assert server.metrics()["vllm:kv_cache_usage_perc"] > baseline
    conn.sock.shutdown(2)
    conn.close()
    m = _metrics_back_to(server, baseline)
    # Aborted (stopped early), not run to max_tokens.
    assert m["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"] < 300
    abort = 'vllm:request_success_total{finished_reason="abort"}'
    assert m[abort] == before[abort] + 1


def test_client_disconnect_before_a_non_streamed_answer_aborts_it(server, reference):
    """Nothing is written to a non-streamed client before the end: the server must notice the closed socket itself
    (a non-streamed answer writes nothing before its end) and abort the request in the engine, freeing its blocks."""
    before = _idle_metrics(server)
    baseline = before["vllm:kv_cache_usage_perc"]
    n, max_tokens = 8, 460
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    body = {"model": "tiny", "prompt": _prompt(reference, 40, 8), "max_tokens": max_tokens, "temperature": 1.0,
            "seed": 3, "n": n, "ignore_eos": True}
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    deadline = time.time() + 10
    while server.metrics()["vllm:num_requests_running"] == 0 and time.time() < deadline:
        time.sleep(0.005)
    assert server.metrics()["vllm:kv_cache_usage_perc"] > baseline
    conn.sock.shutdown(2)
    conn.close()
    m = _metrics_back_to(server, baseline)
    abort = 'vllm:request_success_total{finished_reason="abort"}'
    assert m[abort] == before[abort] + 1
    assert m["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"] < n * max_tokens


def test_queue_depth_limit_answers_429_and_the_request_limits_are_flags(checkpoint, reference):
    s = ServerProcess(checkpoint, "--max-num-seqs", "1", "--max-waiting-requests", "1", "--max-logprobs", "2",
                      "--max-logit-bias", "1")
    try:
        # --max-logprobs / --max-logit-bias: at the limit served, past it a 400 naming the field.
        client = s.client()
        r = client.completions.create(model="tiny", prompt="hello", max_tokens=2, logprobs=2, logit_bias={"7": 1})
        lp = r.choices[0].logprobs  # the sampled token is listed too, as OpenAI's legacy API and vLLM list it
        assert len(lp.top_logprobs[0]) in (2, 3) and lp.tokens[0] in lp.top_logprobs[0]
        with pytest.raises(openai.BadRequestError, match="logprobs: must be in"):
            client.completions.create(model="tiny", prompt="hello", max_tokens=2, logprobs=3)
        with pytest.raises(openai.BadRequestError, match="top_logprobs: must be in"):
            client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2,
                                           logprobs=True, top_logprobs=3)
        with pytest.raises(openai.BadRequestError, match="logit_bias"):
            client.completions.create(model="tiny", prompt="hello", max_tokens=2, logit_bias={"7": 1, "8": 1})
        statuses = []

        def run(i):
            body = {"model": "tiny", "prompt": _prompt(reference, 8, 300 + i), "max_tokens": 150, "temperature": 0,
                    "ignore_eos": True}
            status, text = s.raw("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
            statuses.append((status, json.loads(text)))

        _in_threads(run, 6)
        codes = sorted(code for code, _ in statuses)
        assert 200 in codes and 429 in codes and set(codes) <= {200, 429}
        assert all(body["error"]["type"] == "rate_limit_error" for code, body in statuses if code == 429)
        assert all(body["usage"]["completion_tokens"] == 150 for code, body in statuses if code == 200)
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("flag, value, message", [
    ("--port", "4294967297", "must be in [0, 65535], got 4294967297"),  # was port 1: int() before the check
    ("--port", "-1", "must be in [0, 65535], got -1"),
    ("--max-body-bytes", "-1", "must be at least 1024, got -1"),  # was size_t(-1): no limit
    ("--max-body-bytes", "1023", "must be at least 1024, got 1023"),
    ("--max-connections", "-5", "must be at least 1, got -5"),
    ("--port", "80x", "expected a number, got '80x'"),
    ("--max-stop", "-1", "must be in [0, 1048576], got -1"),
    ("--max-stop-bytes", "0", "must be in [1, 1048576], got 0"),
    ("--max-stop-token-ids", "4294967296", "must be in [0, 1048576], got 4294967296"),
    ("--max-body-values", "-3", "must be in [0, 1073741824], got -3"),
])
def test_numeric_flags_are_range_checked_before_narrowing(flag, value, message):
    r = subprocess.run([CLI, "serve", "-m", "never_loaded", flag, value], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and r.stderr.strip().splitlines() == [f"attnzoo: error: {flag}: {message}"], r.stderr


def test_max_model_len_past_the_models_context_is_refused(checkpoint):
    """As vLLM: a --max-model-len above max_position_embeddings would serve positions the model never saw."""
    r = subprocess.run([CLI, "serve", "-m", checkpoint, "--port", "0", "--max-model-len", "99999999999"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and r.stderr.strip().splitlines()[-1] == \
        f"attnzoo: error: max_model_len: 99999999999 is more than the model's context of {MAX_LEN} " \
        f"(max_position_embeddings, or YaRN's original length * factor)", r.stderr
    s = ServerProcess(checkpoint, "--max-model-len", "64")
    try:
        body = {"model": "tiny", "prompt": list(range(5, 65)), "max_tokens": 8}
        status, text = s.raw("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        assert status == 400 and "max_model_len 64" in text, text
    finally:
        assert s.stop() == 0


def test_small_pool_preempts_and_every_request_completes(checkpoint, reference):
    # 2 layers x (K + V) x 2 heads x 16 dims x 4 bytes = 512 bytes per token: 24 blocks of 16 tokens hold 384
    # tokens. Each request grows to 12-15 blocks (fits alone); any two running together outgrow the pool.
    s = ServerProcess(checkpoint, "--kv-cache-memory", str(24 * 16 * 512), "--block-size", "16")
    try:
        prompts = [_prompt(reference, 30 + 7 * i, 200 + i) for i in range(8)]
        # ignore_eos: every request holds its blocks for all its tokens, so they must overlap.
        wants = [_text(reference, reference.generate(p, max_new_tokens=150, eos_token_id=[])) for p in prompts]
        got = [None] * len(prompts)
        clients = [s.client() for _ in prompts]
        start = threading.Barrier(len(prompts))

        def run(i):
            start.wait()
            got[i] = clients[i].completions.create(model="tiny", prompt=prompts[i], max_tokens=150, temperature=0,
                                                   extra_body={"ignore_eos": True}).choices[0].text

        _in_threads(run, len(prompts))
        assert got == wants
        assert s.metrics()["vllm:num_preemptions_total"] > 0
    finally:
        assert s.stop() == 0


def test_bench_serve_reports_every_request_and_the_prefix_hits(server):
    """`attnzoo bench serve` (through the CLI's hand-over) against the running server: every request completes,
    token counts add up, and a shared-prefix dataset shows prefix-cache hits in the server's /metrics."""
    out = subprocess.run([CLI, "bench", "serve", "--base-url", server.url, "--dataset", "shared-prefix",
                          "--prefix-len", "64", "--input-len", "8", "--output-len", "6", "--num-prompts", "12",
                          "--request-rate", "200", "--max-concurrency", "4", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["completed"] == 12 and doc["failed"] == 0
    assert doc["total_input_tokens"] == 12 * (64 + 8) and doc["total_output_tokens"] == 12 * 6
    assert doc["ttft_ms"]["median"] > 0 and doc["tpot_ms"]["p99"] >= doc["tpot_ms"]["median"] > 0
    assert doc["e2el_ms"]["mean"] >= doc["ttft_ms"]["mean"]
    # 64 shared tokens are 4 full blocks: every prompt after the first finds them cached.
    assert doc["prefix_cache_hit_rate"] > 0.5  # even if the first 4 (concurrent) all miss: 8 * 64 / 864
    table = subprocess.run([CLI, "bench", "serve", "--base-url", server.url, "--num-prompts", "2", "--input-len",
                            "5", "--output-len", "3"], capture_output=True, text=True, timeout=120)
    assert table.returncode == 0 and "Successful requests" in table.stdout and "Median TTFT (ms)" in table.stdout


def test_speculative_server_gives_the_same_greedy_text_and_counts_acceptance(checkpoint, reference):
    s = ServerProcess(checkpoint, "--speculative", "ngram", "--num-speculative-tokens", "3",
                      "--prompt-lookup-max", "3", "--kv-cache-memory", str(64 << 20))
    try:
        client = s.client()
        for seed, n in ((0, 7), (1, 30), (2, 60)):
            ids = _prompt(reference, n, seed)
            ids = ids + ids[: n // 2]  # a repeat for prompt lookup to find
            want = reference.generate(ids, max_new_tokens=40)
            r = client.completions.create(model="tiny", prompt=ids, max_tokens=40, temperature=0)
            assert r.choices[0].text == _text(reference, want)
            assert r.usage.completion_tokens == len(want)
        m = s.metrics()
        assert m["vllm:spec_decode_num_draft_tokens_total"] > 0
        assert 0 <= m["vllm:spec_decode_num_accepted_tokens_total"] <= m["vllm:spec_decode_num_draft_tokens_total"]
    finally:
        assert s.stop() == 0


def test_one_eos_rule_for_generate_chat_and_serve(checkpoint, reference, tmp_path):
    """attnzoo generate / generate --chat, Model.generate / Model.chat, the Python Engine and attnzoo serve stop at the
    same ids (_core.default_eos_ids): here generation_config.json names a token the model says fourth, which only
    the checkpoint's configs call an end, and the chat adds the template's end of turn."""
    import shutil
    from attnzoo import _core
    from attnzoo.engine import Engine
    from test_chat_cli import IM_END, QUESTION
    d = tmp_path / "eos"
    shutil.copytree(checkpoint, d)
    ids = reference.tokenizer.encode(QUESTION, add_special_tokens=True)
    said = reference.generate(ids, max_new_tokens=12, eos_token_id=[])
    stop_id = said[3]
    assert stop_id not in said[:3]
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": [EOS, stop_id]}))
    m = Model.load(str(d))
    tok_eos = set(m.tokenizer.eos_token_ids)
    want = sorted({EOS, stop_id} | tok_eos)
    assert _core.default_eos_ids(str(d), m.tokenizer._native, []) == want
    assert Engine(m).eos_token_ids == want
    assert _core.default_eos_ids(str(d), m.tokenizer._native, [IM_END]) == sorted(set(want) | {IM_END})

    text = m.generate(QUESTION, max_new_tokens=12)
    assert text == reference.tokenizer.decode(said[:3], skip_special_tokens=True)  # stopped before the 4th
    r = subprocess.run([CLI, "generate", "-m", str(d), "-p", QUESTION, "-n", "12"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == text + "\n" and "stop: eos" in r.stderr
    chat = m.chat([{"role": "user", "content": QUESTION}], max_new_tokens=12)
    r = subprocess.run([CLI, "generate", "-m", str(d), "--chat", "-p", QUESTION, "-n", "12"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == chat + "\n"

    s = ServerProcess(str(d))
    try:
        client = s.client()
        c = client.completions.create(model="tiny", prompt=QUESTION, max_tokens=12, temperature=0)
        assert (c.choices[0].text, c.choices[0].finish_reason) == (text, "stop")
        c = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": QUESTION}],
                                           max_tokens=12, temperature=0)
        assert c.choices[0].message.content == chat
    finally:
        assert s.stop() == 0
