"""The CLI as a new user meets it: --help / -h on every command (usage on stdout, exit 0), --version from the
same source as attnzoo.__version__, misspelt options answered with the closest valid one, llama.cpp's spellings
(-t, --temp, --n-predict, --repeat-penalty, -f FILE, -p - from stdin) meaning exactly what the long flags mean,
parameter counts in units, and a greedy run's summary without sampling settings it did not use.

The CLI binary is $ATTNZOO_CLI, else build/attnzoo of this checkout."""
import os
import re
import subprocess

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")

import attnzoo  # noqa: E402
from test_chat_cli import _tokenizer  # noqa: E402  (a tiny trained byte-level BPE)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("ATTNZOO_CLI", os.path.join(ROOT, "build", "attnzoo"))
pytestmark = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"attnzoo CLI not built at {CLI}")


def run(*args, stdin=None):
    return subprocess.run([CLI, *args], input=stdin, capture_output=True, text=True, timeout=120)


def _info_line(variable, value, prefix):
    """`attnzoo info`'s line starting with `prefix` under variable=value; None where a bad value was refused by name."""
    r = subprocess.run([CLI, "info"], capture_output=True, text=True, timeout=120, env=dict(os.environ, **{variable: value}))
    if value == "yes":
        assert r.returncode != 0 and variable in r.stderr and "Traceback" not in r.stderr
        return None
    assert r.returncode == 0, r.stderr
    return next(l for l in r.stdout.splitlines() if l.startswith(prefix))


@pytest.mark.parametrize("value", ["0", "1", "yes"])
def test_info_says_whether_bf16_products_use_vdpbf16ps(value):
    line = _info_line("ATTNZOO_BF16_DOT", value, "bf16 products")
    if line is None:
        return
    if "avx512_bf16" not in attnzoo.supported_targets():
        assert "widened to f32 (no AVX-512-BF16" in line
    elif line.split()[2:4] == ["AMX", "tiles"]:  # AMX multiplies whatever the rule says; the line says the rest
        without = "vdpbf16ps" if value == "1" else "widened to f32"
        assert line.endswith(f"(without them: {without}, ATTNZOO_BF16_DOT={value})"), line
    elif value == "1":
        assert line.split()[2:] == ["vdpbf16ps", "(ATTNZOO_BF16_DOT=1)"]
    else:
        assert line.split()[2:] == ["widened", "to", "f32", "(ATTNZOO_BF16_DOT=0)"]


@pytest.mark.parametrize("value", ["0", "1", "yes"])
def test_info_says_whether_amx_tiles_run(value):
    line = _info_line("ATTNZOO_AMX", value, "amx ")
    if line is None:
        return
    has_amx = "amx_bf16" in open("/proc/cpuinfo").read()
    if not has_amx:
        assert "no AMX-BF16 on this CPU" in line
    elif value == "0":
        assert line.split()[1:] == ["ATTNZOO_AMX=0"]
    else:
        assert "AMX-BF16 tiles" in line or "refused" in line or "XCR0" in line or "below avx512_bf16" in line


@pytest.mark.parametrize("value", ["0", "1", "yes"])
def test_info_says_whether_the_avx2_rows_take_avx_vnni(value):
    env = dict(os.environ, ATTNZOO_AVX_VNNI=value, ATTNZOO_TARGET="avx2")
    r = subprocess.run([CLI, "info"], capture_output=True, text=True, timeout=120, env=env)
    if value == "yes":
        assert r.returncode != 0 and "ATTNZOO_AVX_VNNI" in r.stderr and "Traceback" not in r.stderr
        return
    assert r.returncode == 0, r.stderr
    line = next(l for l in r.stdout.splitlines() if l.startswith("avx-vnni "))
    flags = open("/proc/cpuinfo").read().split()
    if "avx_vnni" not in flags:
        assert "no AVX-VNNI on this CPU" in line
    elif value == "0":
        assert line.split()[1:] == ["ATTNZOO_AVX_VNNI=0"]
    elif "avx2" not in attnzoo.supported_targets():
        assert "unused" in line
    else:
        assert "vpdpbusd (VEX) in the AVX2 regrouped rows" in line, line


def write_tiny_model(d):
    """A tiny random Llama with a trained byte-level BPE and a ChatML template: every CLI command can run on it."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from test_chat_cli import _write_checkpoint
    tok = _tokenizer()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, bos_token_id=1,
                      eos_token_id=2)
    _write_checkpoint(d, LlamaForCausalLM(cfg), tok)
    return d


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return write_tiny_model(str(tmp_path_factory.mktemp("cli_model")))


@pytest.mark.parametrize("command", [[], ["info"], ["bench"], ["bench", "kernels"], ["tokenize"], ["tokenizer"],
                                     ["tokenizer", "train"], ["inspect"], ["generate"], ["chat"], ["quantize"],
                                     ["perplexity"], ["serve"]])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_command_answers_help(command, flag):
    r = run(*command, flag)
    assert r.returncode == 0, (command, r.stderr)
    assert r.stdout.startswith("usage: attnzoo"), (command, r.stdout)
    assert "Traceback" not in r.stdout + r.stderr


@pytest.mark.parametrize("command", [["bench", "model"], ["explain"], ["conformance"]])
def test_python_backed_commands_answer_help(command):
    r = run(*command, "--help")
    assert r.returncode == 0, (command, r.stderr)
    assert "usage:" in r.stdout and "Traceback" not in r.stderr


def test_version_is_the_packages():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"attnzoo {attnzoo.__version__}"
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:  # the one place it is written
        assert re.search(r"project\(attnzoo LANGUAGES CXX VERSION ([0-9.]+)\)", f.read()).group(1) == \
            attnzoo.__version__


@pytest.mark.parametrize("command, typo, near", [
    (["generate", "-m", "x", "-p", "y"], "--temprature", "--temperature"),
    (["chat", "-m", "x"], "--top_k", "--top-k"),
    (["tokenize", "-m", "x"], "--jsn", "--json"),
    (["inspect", "x"], "--block-sise", "--block-size"),
    (["bench", "kernels"], "--quik", "--quick"),
    (["perplexity", "-f", "x"], "--chunk", "--chunks"),
    (["serve", "-m", "x"], "--max-conections", "--max-connections"),
])
def test_unknown_option_names_the_closest(command, typo, near):
    r = run(*command, typo)
    assert r.returncode != 0
    assert f"unknown option '{typo}' (did you mean {near}?)" in r.stderr


def test_unrelated_option_gets_no_guess():
    r = run("generate", "-m", "x", "-p", "y", "--frobnicate")
    assert r.returncode != 0 and "unknown option '--frobnicate'" in r.stderr and "did you mean" not in r.stderr


def _generated(r):
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_prompt_from_stdin_and_file_equals_the_flag(model_dir, tmp_path):
    text = "the quick brown fox"
    want = _generated(run("generate", "-m", model_dir, "-p", text, "-n", "6"))
    assert _generated(run("generate", "-m", model_dir, "-p", "-", "-n", "6", stdin=text)) == want
    prompt_file = tmp_path / "prompt.txt"
    prompt_file.write_text(text)
    assert _generated(run("generate", "-m", model_dir, "-f", str(prompt_file), "--n-predict", "6")) == want
    r = run("generate", "-m", model_dir, "-f", str(tmp_path / "missing.txt"))
    assert r.returncode != 0 and "missing.txt" in r.stderr


def test_llama_cpp_sampling_spellings_are_aliases(model_dir):
    common = ["generate", "-m", model_dir, "-p", "hello world", "-n", "8", "--seed", "3", "--top-k", "20"]
    long = run(*common, "--temperature", "1.5", "--repetition-penalty", "1.3", "--threads", "1")
    short = run(*common, "--temp", "1.5", "--repeat-penalty", "1.3", "-t", "1")
    assert _generated(short) == _generated(long)
    assert "temperature 1.5 top_k 20" in short.stderr


def test_greedy_summary_shows_no_sampling_settings(model_dir):
    r = run("generate", "-m", model_dir, "-p", "hello", "-n", "3")
    assert r.returncode == 0, r.stderr
    assert "greedy" in r.stderr and "top_k" not in r.stderr


def test_parameter_count_in_units(model_dir):
    r = run("inspect", model_dir)
    assert r.returncode == 0, r.stderr
    n = attnzoo.Model.load(model_dir).inspect()["parameter_count"]
    assert 1_000 < n < 1_000_000  # the tiny model: shown as e.g. 85.2K
    line = next(x for x in r.stdout.splitlines() if x.startswith("parameters"))
    want = f"{n / 1e3:.1f}".removesuffix(".0") + f"K ({n})"
    assert want in line, line


@pytest.mark.parametrize("command", [["generate", "-p", "x", "-m"], ["chat", "-m"], ["inspect", "-m"],
                                     ["tokenize", "hello", "-m"], ["bench", "model", "-m"],
                                     ["explain", "-o", "/tmp/attnzoo_never_written.html", "-m"]])
def test_missing_model_path_gives_one_message(command, tmp_path):
    missing = str(tmp_path / "no_such_model")
    r = run(*command, missing)
    assert r.returncode != 0
    assert f"model path not found: {missing}" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_explain_into_a_missing_directory_fails_first(tmp_path):
    r = run("explain", "-o", str(tmp_path / "nowhere" / "page.html"))
    assert r.returncode != 0 and "does not exist" in r.stderr and "Traceback" not in r.stderr


def test_generation_stays_inside_the_models_context(model_dir):
    """The tiny model has max_position_embeddings=256: a longer prompt is refused before any work, and an answer
    that would run past it is shortened with a notice."""
    r = run("generate", "-m", model_dir, "-p", "the quick brown fox jumps over the lazy dog. " * 40)
    assert r.returncode != 0 and "the model's context (max_position_embeddings, or YaRN's original length * factor) is 256" in r.stderr and r.stdout == ""
    r = run("generate", "-m", model_dir, "-p", "hello world", "-n", "100000")
    assert r.returncode == 0, r.stderr
    m = re.search(r"-n lowered to (\d+): prompt (\d+) \+ answer must fit the model's context of 256", r.stderr)
    assert m and int(m.group(1)) + int(m.group(2)) == 256


def test_ctx_size_bounds_prompt_and_answer(model_dir):
    """llama.cpp's -c / --ctx-size: prompt + answer within N tokens (never past the model's own context), the same
    rules as the model's context: -n lowered with a notice, a prompt leaving no room refused; chat keeps its loop."""
    r = run("generate", "-m", model_dir, "-p", "hello world", "-c", "5", "-n", "10")
    m = re.search(r"-n lowered to (\d+): prompt (\d+) \+ answer must fit --ctx-size of 5", r.stderr)
    assert r.returncode == 0 and m and int(m.group(1)) + int(m.group(2)) == 5
    assert _generated(r) == _generated(run("generate", "-m", model_dir, "-p", "hello world", "--ctx-size", "5"))
    r = run("generate", "-m", model_dir, "-p", "hello world hello world", "--ctx-size", "3")
    assert r.returncode != 0 and "--ctx-size is 3" in r.stderr and r.stdout == ""
    r = run("generate", "-m", model_dir, "-p", "hello", "-c", "100000", "-n", "100000")  # the model's 256 wins
    assert r.returncode == 0 and "the model's context of 256" in r.stderr
    r = run("chat", "-m", model_dir, "-c", "4", stdin="hello world hello world\n/exit\n")
    assert r.returncode == 0 and "--ctx-size is 4" in r.stderr and "/reset" in r.stderr


def test_batch_invariant_flag_is_taken_where_it_is_listed(model_dir):
    """generate, serve and perplexity list --batch-invariant; generate runs with it (the same answer twice)."""
    for command in ("generate", "serve", "perplexity"):
        assert "--batch-invariant" in run(command, "--help").stdout, command
    first = _generated(run("generate", "-m", model_dir, "-p", "hello", "-n", "4", "--batch-invariant"))
    assert first and _generated(run("generate", "-m", model_dir, "-p", "hello", "-n", "4", "--batch-invariant")) == first


def test_device_flag_on_every_model_command(model_dir, tmp_path):
    # --device cpu and auto give the CPU run; a GPU the machine lacks is refused by name before the weights load,
    # a malformed name and a bad --gpu-memory-utilization name their flag.
    want = _generated(run("generate", "-m", model_dir, "-p", "hello", "-n", "4"))
    for device in ("cpu", "auto"):
        assert _generated(run("generate", "-m", model_dir, "-p", "hello", "-n", "4", "--device", device)) == want
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog " * 8)
    commands = [["generate", "-m", model_dir, "-p", "hello", "-n", "4"], ["chat", "-m", model_dir],
                ["perplexity", "-m", model_dir, "-f", str(text), "-c", "32"], ["serve", "-m", model_dir, "--port", "0"]]
    for command in commands:
        r = run(*command, "--device", "cuda", stdin="")
        r = run(*command, "--device", "cuda:7", stdin="")
        assert r.returncode != 0 and re.search(r"device: cuda:7 asked, but (no GPU is usable here|this build has no "
                                               r"CUDA|this machine has \d+ GPU)", r.stderr), (command, r.stderr)
        r = run(*command, "--device", "gpu", stdin="")
        assert r.returncode != 0 and "--device: expected cpu, cuda or cuda:N, got 'gpu'" in r.stderr, (command, r.stderr)
        r = run(*command, "--gpu-memory-utilization", "1.5", stdin="")
        assert r.returncode != 0 and "--gpu-memory-utilization: must be a fraction in (0, 1], got 1.5" in r.stderr, \
            (command, r.stderr)


def _one_error_line(r):
    """The refusal of a bad input: non-zero exit and one `attnzoo: error:` line, no traceback."""
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("attnzoo: error: "), r.stderr
    return lines[0]


def _text_commands(model_dir, path):
    return [(["generate", "-m", model_dir, "-f", path], "-f"), (["perplexity", "-m", model_dir, "-f", path], "-f"),
            (["tokenize", "-m", model_dir, "--report", path], "--report")]


def test_text_inputs_refuse_a_directory_by_name(model_dir, tmp_path):
    for command, flag in _text_commands(model_dir, str(tmp_path)):
        line = _one_error_line(run(*command))
        assert f"{flag}: '{tmp_path}' is a directory" in line, (command, line)


def test_text_inputs_are_read_up_to_a_limit(model_dir):
    """/dev/zero never ends: the read stops at the 1 GiB limit with an error naming the file, in well under the
    address space given here (the limit's string, not a doubling past it)."""
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    for command, flag in _text_commands(model_dir, "/dev/zero"):
        r = subprocess.run([CLI, *command], capture_output=True, text=True, timeout=120, preexec_fn=cap)
        line = _one_error_line(r)
        assert f"{flag}: '/dev/zero': more than the 1024 MiB a text input may hold" in line, (command, line)


def test_a_fifo_is_read_as_a_text_input(model_dir, tmp_path):
    import threading
    text = "the quick brown fox"
    want = _generated(run("generate", "-m", model_dir, "-p", text, "-n", "4"))
    fifo = str(tmp_path / "prompt.fifo")
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: open(fifo, "w").write(text))
    writer.start()
    got = _generated(run("generate", "-m", model_dir, "-f", fifo, "-n", "4"))
    writer.join()
    assert got == want


def test_text_that_is_not_utf8_is_refused_naming_its_source(model_dir, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok \xff\xfe bad")
    # Arguments in surrogateescape: subprocess passes the raw bytes 0xff 0xfe.
    cases = [(["-p", "ok \udcff\udcfe bad"], "-p: not valid UTF-8 (byte 3)"),
             (["-f", str(bad)], f"-f: '{bad}': not valid UTF-8 (byte 3)"),
             (["-p", "hello", "--chat", "--system", "\udcff"], "--system: not valid UTF-8 (byte 0)")]
    for args, message in cases:
        line = _one_error_line(run("generate", "-m", model_dir, *args))
        assert message in line, (args, line)
    r = subprocess.run([CLI, "generate", "-m", model_dir, "-p", "-"], input=b"\xff", capture_output=True, timeout=120)
    assert r.returncode != 0 and b"-p -: stdin: not valid UTF-8 (byte 0)" in r.stderr, r.stderr
    line = _one_error_line(run("perplexity", "-m", model_dir, "-f", str(bad)))
    assert f"-f: '{bad}': not valid UTF-8 (byte 3)" in line, line


@pytest.mark.parametrize("flags, message", [
    (["--threads", "4abc"], "--threads: expected a number, got '4abc'"),
    (["--threads", "2.9"], "--threads: expected a number, got '2.9'"),
    (["--threads", "0x10"], "--threads: expected a number, got '0x10'"),
    (["--threads", "0"], "--threads: must be in [1, 1024], got 0"),
    (["-t", "99999999999"], "--threads: must be in [1, 1024], got 99999999999"),
])
def test_threads_takes_a_whole_integer_or_names_itself(flags, message):
    r = run(*flags, "info")
    assert r.returncode != 0 and r.stderr.strip().splitlines() == [f"attnzoo: error: {message}"], r.stderr


@pytest.mark.parametrize("value, message", [("abc", "expected a number, got 'abc'"),
                                            ("16abc", "expected a number, got '16abc'"),
                                            ("1e30", "expected a number, got '1e30'"),
                                            ("0", "must be positive, got 0")])
def test_inspect_block_size_takes_a_whole_integer_or_names_itself(model_dir, value, message):
    r = run("inspect", "-m", model_dir, "--block-size", value)
    assert r.returncode != 0 and r.stderr.strip().splitlines() == [f"attnzoo: error: --block-size: {message}"], \
        r.stderr
    r = run("inspect", "-m", model_dir, "--block-size", "32")
    assert r.returncode == 0 and "blocks of 32 tokens" in r.stdout, r.stderr


@pytest.mark.parametrize("value", ["nan", "-1", "-inf", "inf"])
def test_a_temperature_that_is_none_is_refused_not_run_greedy(model_dir, value):
    r = run("generate", "-m", model_dir, "-p", "hello", "-n", "2", "--temperature", value)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and r.stdout == "" and len(lines) == 1, r.stderr
    assert lines[0].startswith("attnzoo: error: temperature: must be a finite number >= 0 (0 = greedy), got "), lines
