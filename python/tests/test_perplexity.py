"""Perplexity (`attnzoo perplexity`, Model.perplexity) against an independent PyTorch computation of llama.cpp's
definition: each window of n_ctx tokens run alone through the transformers model (its first token replaced by
BOS when there is one), log-softmax in float64 over the logits of positions n_ctx/2 .. n_ctx-2 scoring the next
token, the running estimate after each window and llama.cpp's error estimate. Dense (Qwen2), recurrent
(Mamba-2), hybrid (Qwen3-Next) and GGUF (Q8_0) checkpoints; every n_batch layout (windows in pieces, one per
call, several side by side); the CLI on a checkpoint with a BOS-adding tokenizer; the errors; and the real
SmolLM2-135M Q4_1 GGUF on the Sherlock Holmes text when both are present."""
import math
import os
import re
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

import model_checks as checks  # noqa: E402
from attnzoo import perplexity as ppl_module  # noqa: E402
from attnzoo.model import Model  # noqa: E402
from conftest import matmul_precision  # noqa: E402
from test_cli import CLI, write_tiny_model  # noqa: E402
from test_gguf_reader import SMOLLM2  # noqa: E402

N_CTX = 32


def torch_perplexity(ref, ids, n_ctx, bos=None, n_chunks=None):
    """(ppl, error, running ppl per window) as llama.cpp defines them, from transformers' logits."""
    first = n_ctx // 2
    windows = len(ids) // n_ctx if n_chunks is None else min(n_chunks, len(ids) // n_ctx)
    nll, running = [], []
    for w in range(windows):
        window = np.array(ids[w * n_ctx:(w + 1) * n_ctx], dtype=np.int64)
        if bos is not None:
            window[0] = bos
        with torch.no_grad():
            logits = ref(torch.from_numpy(window)[None]).logits[0].double()
        logp = torch.log_softmax(logits[first:n_ctx - 1], dim=-1)
        target = torch.as_tensor(np.asarray(ids[w * n_ctx + first + 1:(w + 1) * n_ctx], dtype=np.int64))
        nll.extend((-logp.gather(1, target[:, None])[:, 0]).tolist())
        running.append(math.exp(sum(nll) / len(nll)))
    x = np.array(nll)
    ppl = math.exp(x.mean())
    return ppl, ppl * math.sqrt(x.var() / (len(x) - 1)), running


def check_matches(m, ref, ids, bos=None, n_batches=(2048,), n_chunks=None):
    want_ppl, want_err, want_running = torch_perplexity(ref, ids, N_CTX, bos, n_chunks)
    assert 1.5 < want_ppl < 1e4  # a random model, but not a degenerate one
    for n_batch in n_batches:
        r = m.perplexity(ids, n_ctx=N_CTX, n_batch=n_batch, n_chunks=n_chunks, bos=bos)
        np.testing.assert_allclose(r.running_ppl, want_running, rtol=2e-4, err_msg=f"n_batch={n_batch}")
        assert r.ppl == pytest.approx(want_ppl, rel=2e-4)
        assert r.ppl_error == pytest.approx(want_err, rel=2e-3)
        assert r.n_tokens == len(ids) and r.n_scored == len(want_running) * (N_CTX - 1 - N_CTX // 2)
    return r


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory):
    from test_model_llama import VOCAB, _build
    directory = tmp_path_factory.mktemp("ppl_qwen2")
    ref = _build("qwen2", directory)
    return Model.load(directory), ref, checks.prompt(VOCAB, 5 * N_CTX + 7, seed=3)


def test_dense_checkpoint_matches_torch_in_every_batch_layout(qwen2):
    m, ref, ids = qwen2
    # 5: each window in pieces (the first pieces score nothing); 32: one window per call; 96: three side by side
    # and a group of two at the end.
    check_matches(m, ref, ids, n_batches=(5, 32, 96, 2048))
    r = check_matches(m, ref, ids, bos=7, n_batches=(13, 2048), n_chunks=3)
    assert len(r.running_ppl) == 3 and len(r.chunk_nll) == 3
    assert m.pool_stats()["free_state_slots"] == m.pool_stats()["state_slots"]  # every window's sequence freed


@pytest.mark.parametrize("family,kind", [("mamba2", "g1_conv4"), ("qwen3_next", "dense_layer_types")])
def test_recurrent_and_hybrid_checkpoints_match_torch(family, kind, tmp_path):
    if family == "mamba2":
        from test_model_mamba2 import VOCAB, _build
    else:
        from test_model_qwen3_next import VOCAB, _build, _uses_torch_path
        assert _uses_torch_path()
    ref = _build(kind, tmp_path)
    m = Model.load(tmp_path)
    ids = checks.prompt(VOCAB, 4 * N_CTX, seed=5)
    check_matches(m, ref, ids, bos=3, n_batches=(11, 64))
    stats = m.pool_stats()
    assert stats["free_state_slots"] == stats["state_slots"]


def test_gguf_file_matches_torch(tmp_path):
    from test_gguf_model import VOCAB, _build
    ref, path = _build("llama", "q8_0", str(tmp_path))
    # Q8_0 blocks against torch on their f32 values: f32 products and, decided at load, an f32 KV cache
    with matmul_precision("highest"):
        m = Model.load(path)
        check_matches(m, ref, checks.prompt(VOCAB, 3 * N_CTX + 5, seed=9), n_batches=(2048, 20))


def test_python_errors_name_the_argument(qwen2):
    m, ref, ids = qwen2
    with pytest.raises(ValueError, match=r"ids: tokenizes to 63 tokens; .*needs at least 2 \* 32 = 64"):
        m.perplexity(ids[:63], n_ctx=32)
    with pytest.raises(ValueError, match="n_ctx: .* longer than the model's context of 256 "):
        m.perplexity(np.tile(ids, 4), n_ctx=512)
    with pytest.raises(ValueError, match="n_ctx: .*at least 4"):
        m.perplexity(ids, n_ctx=3)
    with pytest.raises(ValueError, match="n_chunks"):
        m.perplexity(ids, n_ctx=32, n_chunks=0)
    with pytest.raises(ValueError, match="n_batch"):
        m.perplexity(ids, n_ctx=32, n_batch=0)
    with pytest.raises(ValueError, match="bos: id 100000 outside the vocabulary"):
        m.perplexity(ids, n_ctx=32, bos=100000)
    bad = ids.copy()
    bad[70] = 5000
    with pytest.raises(ValueError, match="token 70 is id 5000, outside the model's vocabulary"):
        m.perplexity(bad, n_ctx=32)
    with pytest.raises(ValueError, match="has no tokenizer"):
        m.perplexity("some text", n_ctx=32)


def _run(*args):
    return subprocess.run([CLI, "perplexity", *args], capture_output=True, text=True, timeout=120)


def _parse(stdout):
    running = [float(x) for x in re.findall(r"\[\d+\]([0-9.]+),", stdout)]
    final = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", stdout)
    assert final, stdout
    return running, float(final.group(1)), float(final.group(2))


TEXT = "".join(f"Line {i}: the quick brown fox jumps over the lazy dog, hello world.\n" for i in range(40))


@pytest.fixture(scope="module")
def bos_model(tmp_path_factory):
    """The CLI's tiny Llama with a tokenizer that puts <s> before every text, and its transformers twin."""
    from tokenizers import Tokenizer, processors
    directory = write_tiny_model(str(tmp_path_factory.mktemp("ppl_cli")))
    tok = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    tok.save(os.path.join(directory, "tokenizer.json"))
    ref = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32,
                                                            attn_implementation="eager").eval()
    return directory, tok, bos, ref


@pytest.mark.skipif(not os.access(CLI, os.X_OK), reason="attnzoo CLI not built")
def test_cli_prints_llama_cpps_running_and_final_estimates(bos_model, tmp_path):
    directory, tok, bos, ref = bos_model
    ids = tok.encode(TEXT).ids
    assert ids[0] == bos and len(ids) > 4 * N_CTX
    want_ppl, want_err, want_running = torch_perplexity(ref, ids, N_CTX, bos)
    path = tmp_path / "text.txt"
    path.write_text(TEXT)
    r = _run("-m", directory, "-f", str(path), "-c", str(N_CTX), "-b", "40")
    assert r.returncode == 0, r.stderr
    running, final, err = _parse(r.stdout)
    np.testing.assert_allclose(running, want_running, rtol=2e-4)
    assert final == pytest.approx(want_ppl, rel=2e-4) and err == pytest.approx(want_err, rel=2e-3)
    # The Python API takes the same text (BOS found from the tokenizer) to the same numbers.
    res = Model.load(directory).perplexity(TEXT, n_ctx=N_CTX)
    np.testing.assert_allclose(res.running_ppl, want_running, rtol=2e-4)
    r = _run("-m", directory, "-f", str(path), "-c", str(N_CTX), "--chunks", "2")
    assert r.returncode == 0 and _parse(r.stdout)[0] == running[:2]


@pytest.mark.skipif(not os.access(CLI, os.X_OK), reason="attnzoo CLI not built")
def test_cli_errors_name_the_file_and_the_length(bos_model, tmp_path):
    directory = bos_model[0]
    short = tmp_path / "short.txt"
    short.write_text("the quick brown fox")
    r = _run("-m", directory, "-f", str(short), "-c", "32")
    assert r.returncode == 1
    assert f"-f: {short}: tokenizes to" in r.stderr and "needs at least 2 * 32 = 64 tokens" in r.stderr, r.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    r = _run("-m", directory, "-f", str(empty))
    assert r.returncode == 1 and f"'{empty}' is empty" in r.stderr, r.stderr
    r = _run("-m", directory, "-f", str(tmp_path / "absent.txt"))
    assert r.returncode == 1 and "-f: cannot open" in r.stderr and "absent.txt" in r.stderr
    long = tmp_path / "long.txt"
    long.write_text(TEXT * 8)
    r = _run("-m", directory, "-f", str(long), "-c", "1024")
    assert r.returncode == 1 and "longer than the model's context of 256 (max_position_embeddings" in r.stderr
    for flags, match in ((["-c", "2"], "n_ctx: the window (-c) must be at least 4"), (["--chunks", "0"], "--chunks"),
                         (["-b", "0"], "n_batch: tokens per forward call (-b) must be positive")):
        r = _run("-m", directory, "-f", str(long), *flags)
        assert r.returncode == 1 and match in r.stderr, (flags, r.stderr)
    r = _run("-m", directory)
    assert r.returncode == 1 and "-f FILE" in r.stderr


def test_default_text_is_found_or_named(monkeypatch):
    try:
        path = ppl_module.default_text()
    except FileNotFoundError:
        path = None
    if path is not None:
        with open(path, encoding="utf-8-sig") as f:
            assert "THE ADVENTURES OF SHERLOCK HOLMES" in f.read(4000)
    monkeypatch.setattr(ppl_module, "_DEFAULT_TEXT_GLOBS", ("/nonexistent/pg1661.txt",))
    with pytest.raises(FileNotFoundError, match="golang-github-bkaradzic-go-lz4-dev"):
        ppl_module.default_text()


@pytest.mark.skipif(not os.path.exists(SMOLLM2), reason=f"{SMOLLM2} is missing: run scripts/setup.sh")
@pytest.mark.skipif(not os.access(CLI, os.X_OK), reason="attnzoo CLI not built")
def test_smollm2_gguf_on_sherlock_holmes():
    try:
        text = ppl_module.default_text()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    r = _run("-m", SMOLLM2, "-f", text, "-c", "128", "--chunks", "2")
    assert r.returncode == 0, r.stderr
    running, final, err = _parse(r.stdout)
    assert len(running) == 2 and running[-1] == final
    # A 135M instruct model on 19th-century English prose with 64+ tokens of context: clearly better than chance
    # (vocabulary 49152) and than a unigram model, but no miracle.
    assert 3 < final < 60 and 0 < err < final
    with open(text, encoding="utf-8", newline="") as f:  # the bytes as the CLI read them (CRLF kept)
        res = Model.load(SMOLLM2).perplexity(f.read(), n_ctx=128, n_chunks=2)
    assert res.ppl == pytest.approx(final, abs=1e-4)


def test_quality_table_script_on_tiny_models(bos_model, tmp_path):
    """scripts/quality_table.py (the README's quality table; not run on real models here): one row per file, the
    weight type read from the GGUF's tensors or the safetensors header, every row on the first model's tokens."""
    import sys
    from test_gguf_model import _build
    directory = bos_model[0]
    ref, path = _build("llama", "q8_0", str(tmp_path))  # vocabulary 320 holds the tokenizer's 200 ids
    text = tmp_path / "text.txt"
    text.write_text(TEXT)
    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "quality_table.py")
    r = subprocess.run([sys.executable, script, directory, path, directory, "--text", str(text), "-c", str(N_CTX),
                        "--chunks", "3"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr
    rows = [line.split("|")[1:-1] for line in r.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert [c.strip() for c in rows[0]][:2] == ["model", "weights"]
    first, gguf_row, again = ([c.strip() for c in row] for row in rows[1:])
    assert first[1:3] == ["F32", "F32"] and gguf_row[1] == "Q8_0" and gguf_row[2] == "Q8_0 (+F32)"
    assert float(gguf_row[3]) == pytest.approx(os.path.getsize(path) / 2**20, abs=0.05)
    want = Model.load(directory).perplexity(TEXT, n_ctx=N_CTX, n_chunks=3).ppl
    assert float(first[4]) == pytest.approx(want, abs=1e-4) and again[4] == first[4] and again[6] == "+0.00%"
    assert f"{3 * (N_CTX - 1 - N_CTX // 2)} tokens scored per row" in r.stdout


@pytest.mark.skipif(not os.access(CLI, os.X_OK), reason="attnzoo CLI not built")
def test_quality_table_labels_the_mixture_and_the_pure_type(bos_model, tmp_path):
    """scripts/quality_table.py --from: --types Q4_K is llama-quantize's name for its Q4_K_M mixture and its row says
    Q4_K_M; Q4_K:pure is `--type Q4_K --pure`, every matrix in Q4_K (the head too), labelled "Q4_K (pure)"."""
    import importlib.util
    gguf = pytest.importorskip("gguf")
    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "quality_table.py")
    spec = importlib.util.spec_from_file_location("quality_table", script)
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    table.CLI = CLI
    rows = table.make_rows(bos_model[0], ["Q4_K", "Q4_K:PURE"], str(tmp_path))
    assert [label for _, label in rows] == ["Q4_K_M", "Q4_K (pure)"]
    readers = [gguf.GGUFReader(path) for path, _ in rows]
    mixture, pure = ({t.name: t.tensor_type.name for t in r.tensors} for r in readers)
    assert all(r.fields["general.file_type"].contents() == 15 for r in readers)  # llama.cpp's MOSTLY_Q4_K_M both
    head = "output.weight" if "output.weight" in pure else "token_embd.weight"
    assert pure[head] == pure["blk.0.attn_q.weight"] and mixture[head] != pure[head], (mixture, pure)
    with pytest.raises(SystemExit):
        table.type_row("Q4_K:FAST")
