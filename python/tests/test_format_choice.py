"""One resolution of "auto" (src/models/format_choice.h): the weights' format, the KV cache dtype and the
projections' products, from what a checkpoint stores, the matmul precision and the CPU. The table is checked on
three real files (a block-quantized GGUF, a BF16 GGUF, an f32 checkpoint), and then every front end is asked what
it loaded and compared with the function's answer: Python Model.load / Engine / LLM (Model.formats),
`attnzoo inspect --json`, `attnzoo perplexity` (the loader generate and chat share) and `attnzoo serve`'s startup
log. A front end deciding on its own fails here."""
import json
import os
import subprocess

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gguf")
pytest.importorskip("transformers")

import attnzoo  # noqa: E402
from attnzoo.engine import LLM, Engine  # noqa: E402
from attnzoo.model import Model, resolve_formats  # noqa: E402
from conftest import matmul_precision  # noqa: E402
from test_chat_cli import CLI, needs_cli  # noqa: E402
from test_gguf_reader import SMOLLM2  # noqa: E402

BF16_PRODUCTS = attnzoo._core.bf16_tiles_enabled()  # AMX tiles, or the avx512_bf16 target and the vendor rule / ATTNZOO_BF16_DOT
needs_smollm2 = pytest.mark.skipif(not os.path.exists(SMOLLM2), reason=f"{SMOLLM2} is missing: run scripts/setup.sh")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """{"q4_0": GGUF, "bf16": GGUF, "f32": safetensors directory}: test_gguf_model's tiny Llama."""
    from test_gguf_model import _build, _config, _randomize
    import model_checks as checks
    d = str(tmp_path_factory.mktemp("formats"))
    out = {ftype: _build("llama", ftype, d)[1] for ftype in ("q4_0", "bf16")}
    out["f32"] = os.path.join(d, "f32")
    checks.save_random_model("llama", _config("llama"), out["f32"], _randomize)
    return out


@pytest.fixture
def prompt_int8():
    """Sets the prompt route for one test (set_linear_prompt_int8) and puts the process's setting back."""
    before = attnzoo._core.linear_prompt_int8()
    yield attnzoo._core.set_linear_prompt_int8
    attnzoo._core.set_linear_prompt_int8(before)


def test_the_choice(files, prompt_int8):
    prompt_int8("off")
    q4, bf16, f32 = (resolve_formats(files[k]) for k in ("q4_0", "bf16", "f32"))
    # llama.cpp's arithmetic for a block-quantized file: blocks as stored, a 16-bit cache, 8-bit activations in
    # decode, bf16 products in prefill where the CPU has them (and the prompt route keeps the panels).
    assert (q4["weights_dtype"], q4["kv_cache_dtype"], q4["decode_activations"]) == ("float32", "bfloat16", "int8")
    assert q4["checkpoint"] == "GGUF, mostly Q4_0"
    # A BF16 GGUF computes as a bf16 safetensors checkpoint does: bf16-held weights, bf16 products, bf16 cache.
    assert (bf16["weights_dtype"], bf16["kv_cache_dtype"], bf16["decode_activations"]) == ("bfloat16", "bfloat16", "f32")
    for choice in (q4, bf16):
        assert choice["prefill_products"] == ("bf16" if BF16_PRODUCTS else "f32")
    assert (f32["weights_dtype"], f32["kv_cache_dtype"], f32["prefill_products"]) == ("float32", "float32", "f32")
    # Prompts over Q4_0 blocks on the integer rows: the description says so; the dense checkpoints keep theirs.
    prompt_int8("on")
    rows = resolve_formats(files["q4_0"])
    assert (rows["prefill_products"], rows["decode_activations"]) == ("int8", "int8")
    # The rows this CPU and target run them on (the VNNI rows on AVX-512 VNNI, the AVX2 rows on other x86 targets).
    assert rows["int8_rows"] in ("VNNI", "AVX2", "AVX-VNNI", "portable") and rows["int8_prompt_max_tokens"] is None
    assert f"{rows['int8_rows']} integer rows" in rows["products_reason"]
    assert resolve_formats(files["bf16"])["prefill_products"] == bf16["prefill_products"]
    assert all(choice[k] for choice in (q4, bf16, f32) for k in ("weights_reason", "kv_cache_reason", "products_reason"))
    # "highest" asks for f32 arithmetic: every "auto" follows; explicit values still win.
    with matmul_precision("highest"):
        for path in files.values():
            exact = resolve_formats(path)
            assert (exact["weights_dtype"], exact["kv_cache_dtype"], exact["prefill_products"],
                    exact["decode_activations"]) == ("float32", "float32", "f32", "f32"), path
        asked = resolve_formats(files["q4_0"], "bfloat16", "float16")
    assert (asked["weights_dtype"], asked["kv_cache_dtype"]) == ("bfloat16", "float16")
    assert "asked for" in asked["weights_reason"] and "asked for" in asked["kv_cache_reason"]
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        resolve_formats(files["f32"], "auto", "f12")
    with pytest.raises(ValueError, match="dtype"):
        resolve_formats(files["f32"], "f64")


def test_python_front_ends_load_what_the_function_chose(files):
    for path in files.values():
        want = resolve_formats(path)
        m = Model.load(path)
        assert m.formats == want, path
        info = m.inspect()
        assert info["weights_dtype"] == want["weights_dtype"]
        assert {l["cache"]["dtype"] for l in info["layers"]} == {want["kv_cache_dtype"]}
        engine = Engine(path, max_num_seqs=2)
        llm = LLM(path, max_num_seqs=2)
        try:
            assert engine.model.formats == want and llm.engine.model.formats == want, path
        finally:
            engine.stop()
            llm.stop()


@needs_cli
def test_inspect_reports_the_choice(files):
    for path in files.values():
        out = subprocess.run([CLI, "inspect", "--json", path], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        info = json.loads(out.stdout)
        assert info["formats"] == resolve_formats(path), path
        assert {l["cache"]["dtype"] for l in info["layers"]} == {info["formats"]["kv_cache_dtype"]}
    text = subprocess.run([CLI, "inspect", files["q4_0"], "--matmul-precision", "highest"], capture_output=True,
                          text=True, timeout=60).stdout
    assert "kv cache     float32: matmul precision 'highest' asks for f32 arithmetic" in text


def _printed(lines):
    """{"weights": dtype, "kv cache": dtype} from describe_formats' lines."""
    out = {}
    for line in lines:
        key, _, rest = line.strip().partition("   ")
        if key in ("weights", "kv cache"):
            out[key] = rest.strip().split(":")[0]
    return out


@needs_cli
@needs_smollm2
def test_perplexity_and_serve_load_what_the_function_chose(tmp_path):
    want = resolve_formats(SMOLLM2)
    want = {"weights": want["weights_dtype"], "kv cache": want["kv_cache_dtype"]}
    assert want == {"weights": "float32", "kv cache": "bfloat16"}
    text = tmp_path / "t.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 8)
    out = subprocess.run([CLI, "perplexity", "-m", SMOLLM2, "-f", str(text), "-c", "32", "--chunks", "1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert _printed(out.stderr.splitlines()) == want
    from test_serve import ServerProcess
    server = ServerProcess(SMOLLM2, "--kv-cache-memory", str(16 << 20))
    try:
        lines = [server.lines.get(timeout=10) for _ in range(4)]
    finally:
        server.stop()
    assert _printed(lines) == want
