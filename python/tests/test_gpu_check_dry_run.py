"""scripts/gpu_check.sh, the GPU machine's one prepared run, walked whole on the CPU before a GPU sees it (a dry run):
gpu_bundle.sh packs this build (CI's: every .cu compiled), the run unpacks it in a fresh folder and walks every
step, each failing fast, and what the GPU run's reader relies on must hold: each step the script names is in
gpu_check.json with an exit status or as skipped, the JSON it writes parses, tests.json holds every CUDA test
binary (their GPU tests skipping here), our binaries load the bundle's libraries, the carried GGUF parts join,
the serving proof runs as one of its steps (its JSON beside the others, its log joined), nothing is written outside
OUT_DIR and its eight files, and a step the budget kills is recorded so. torch is hidden
from the Python steps, so each of them fails at its first `import torch` (the scripts themselves have their own
tests: test_check_vs_torch.py, test_gpu_peers.py, test_make_bench_model.py)."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from procfs import live_args

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(os.environ.get("ATTNZOO_BUILD") or os.path.join(ROOT, "build"))
SCRIPT = os.path.join(ROOT, "scripts", "gpu_check.sh")
GGUF = os.path.join(ROOT, ".models", "SmolLM2-135M-Instruct.Q4_1.gguf")
# What gpu_check.sh may leave in OUT_DIR (the device tool returns at most 8 files).
OUT_FILES = {"gpu_check.log", "gpu_check.json", "tests.json", "vs_torch.json", "bench_cuda.json", "gpu_peers.md",
             "gpu_peers.json", "gpu_serve.json"}
HIDDEN = "torch hidden by the dry run"


def cuda_build():
    for name in ("CMakeCache.txt", "build.ninja"):
        try:
            with open(os.path.join(BUILD, name)) as f:
                text = f.read()
        except FileNotFoundError:
            continue
        if "ATTNZOO_WITH_CUDA:INTERNAL=ON" in text or "ATTNZOO_WITH_CUDA=1" in text:
            return True
    return False


def gpu_visible():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = [
    pytest.mark.skipif(not cuda_build(), reason=f"{BUILD} is not a CUDA build (ATTNZOO_CUDA=OFF or no toolkit): "
                                                "no CUDA objects to bundle"),
    pytest.mark.skipif(gpu_visible(), reason="a GPU is visible: gpu_check.sh there is the real run, not a dry one"),
]


def cuda_test_binaries():
    """The binaries gpu_bundle.sh and gpu_check.sh both pick: test_*cuda* but the CPU emulator's."""
    return sorted(n for n in os.listdir(BUILD) if n.startswith("test_") and "cuda" in n and "emulation" not in n
                  and os.access(os.path.join(BUILD, n), os.X_OK) and os.path.isfile(os.path.join(BUILD, n)))


def script_step_names(binaries):
    """Every step name gpu_check.sh's lines give step / step_if_time / step_if_left / skip, its templates expanded:
    "$name" per CUDA test binary, "gguf-perplexity-$dev" per device."""
    names = set()
    with open(SCRIPT) as f:
        for line in f:
            m = re.match(r'\s*(?:step|step_if_time|step_if_left|skip)\s+"?([^\s"]+)"?', line)
            if not m or m.group(1) in ("$1", "$@"):
                continue
            name = m.group(1)
            if name.startswith("$name"):
                names.update(b + name[len("$name"):] for b in binaries)
            elif name.endswith("$dev"):
                names.update(name.replace("$dev", d) for d in ("cpu", "cuda"))
            else:
                assert "$" not in name, f"a step name this test cannot expand: {line.strip()}"
                names.add(name)
    return names


def listing(path):
    """Every path under `path`, relative to it."""
    found = set()
    for parent, dirs, files in os.walk(path):
        for n in dirs + files:
            found.add(os.path.relpath(os.path.join(parent, n), path))
    return found


def hung_sleep_alive(pid):
    """Whether the fake nvidia-smi's sleep still runs under that pid (a zombie or another process there is not it)."""
    args = live_args(pid)
    return args is not None and args[:2] == [b"sleep", b"300"]


def segments(log):
    """Each run step's lines between its '=== NAME (limit' and '=== NAME: exit' lines."""
    out, name, lines = {}, None, []
    for line in log.splitlines():
        m = re.match(r"=== (\S+) \(limit \d+s\)", line)
        if m:
            name, lines = m.group(1), []
            continue
        if name and line.startswith(f"=== {name}: exit"):
            out[name] = "\n".join(lines)
            name = None
        elif name:
            lines.append(line)
    return out


def run_check(root, bundle, name, budget, env=None, path_prefix=None):
    """gpu_check.sh from the bundle in a fresh cwd, TMPDIR and HOME under `root`; returns (exit status, stdout, out
    dir, tmp dir, home, cwd)."""
    out, tmp, home, cwd = (root / f"{name}-{part}" for part in ("out", "tmp", "home", "cwd"))
    for d in (tmp, home, cwd):
        d.mkdir()
    hide = root / "hide-torch" / "torch"
    hide.mkdir(parents=True, exist_ok=True)
    (hide / "__init__.py").write_text(f"raise ImportError('{HIDDEN} (test_gpu_check_dry_run.py)')\n")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_CHECK_", "CUDA_VISIBLE"))}
    environ.update(TMPDIR=str(tmp), HOME=str(home), GPU_CHECK_BUDGET_S=str(budget), PYTHONPATH=str(hide.parent),
                   **(env or {}))
    # python3 is this interpreter, as the image's is the one with torch's CUDA wheels (nvidia-cublas: the bundle's
    # library path takes cuBLASLt from there).
    python = root / "python-bin"
    if not python.exists():
        python.mkdir()
        (python / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        (python / "python3").chmod(0o755)
    environ["PATH"] = f"{python}:{environ['PATH']}"
    if path_prefix:
        environ["PATH"] = f"{path_prefix}:{environ['PATH']}"
    # Its own process group: a run that overstays (a step its limit did not stop) is killed whole, steps included.
    proc = subprocess.Popen(["bash", str(bundle / "gpu_check.sh"), str(bundle), str(out)], cwd=cwd, env=environ,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        stdout, _ = proc.communicate(timeout=budget + 120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return proc.returncode, stdout, out, tmp, home, cwd


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """The bundle of this build (a fast xz preset: CI only unpacks it), the GGUF in carried parts when setup fetched
    it, then one whole walk with a budget no step reaches here."""
    root = tmp_path_factory.mktemp("gpu_dry_run")
    bundle = root / "bundle"
    env = {**os.environ, "GPU_BUNDLE_XZ": "preset=0,dict=8MiB", "ATTNZOO_PYTHON": sys.executable}
    packed = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_bundle.sh"), BUILD, str(bundle)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    assert packed.returncode == 0, packed.stdout
    carry = root / "gpu-carry"
    if os.path.exists(GGUF):
        split = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_split_gguf.sh"), GGUF, str(carry)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        assert split.returncode == 0, split.stdout
    before = listing(bundle)
    carried = listing(carry) if carry.exists() else set()
    rc, stdout, out, tmp, home, cwd = run_check(root, bundle, "walk", 400, env={"GPU_CHECK_CARRY": str(carry)})
    with open(out / "gpu_check.json") as f:
        doc = json.load(f)
    log = (out / "gpu_check.log").read_text()
    yield dict(root=root, bundle=bundle, before=before, carry=carry, carried=carried, rc=rc, stdout=stdout, out=out,
               tmp=tmp, home=home, cwd=cwd, doc=doc, log=log, steps={s["step"]: s for s in doc["steps"]})
    shutil.rmtree(root)  # ~0.5 GB unpacked: not left in pytest's kept temporary folders


def test_every_step_the_script_names_is_recorded_once(dry_run):
    assert dry_run["rc"] == 0, dry_run["stdout"]
    binaries = cuda_test_binaries()
    assert binaries, "a CUDA build without test_*cuda* binaries"
    names = [s["step"] for s in dry_run["doc"]["steps"]]
    assert len(names) == len(set(names)), names
    assert set(names) == script_step_names(binaries)
    runs = segments(dry_run["log"])
    for s in dry_run["doc"]["steps"]:
        assert set(s) == {"step", "exit", "seconds", "limit", "timed_out"}, s
        if s["exit"] is None:
            assert f"=== {s['step']}: skipped" in dry_run["log"]
        else:
            assert isinstance(s["exit"], int) and s["step"] in runs and s["limit"] > 0, s
            assert s["timed_out"] is False, (s, runs[s["step"]])  # nothing here comes near a limit


def test_the_bundle_unpacks_to_the_paths_the_script_runs(dry_run):
    bundle, steps, runs = dry_run["bundle"], dry_run["steps"], segments(dry_run["log"])
    binaries = cuda_test_binaries()
    # The archive's binaries and libraries beside it, nothing else in the bundle's folder (no __pycache__ either).
    unpacked = dry_run["before"] | {"attnzoo", "test_core", "lib", *binaries} | {
        f"lib/{n}" for n in os.listdir(bundle / "lib")}
    assert listing(bundle) == unpacked
    assert os.listdir(bundle / "lib"), "no library bundled"
    assert "error while loading shared libraries" not in dry_run["log"]
    assert not [line for line in dry_run["log"].splitlines() if str(bundle) in line and "No such file" in line]
    # Our binaries, on the library path gpu_check.sh gives them, load every library outside the system's folders
    # from it: the bundle's copies, and cuBLASLt (a build with it) from python3's nvidia-cublas, never through the
    # build's RUNPATH (this checkout's .cuda/toolkit, which the GPU machine does not have).
    library_path = re.search(r"^=== info \(limit \d+s\): env LD_LIBRARY_PATH=(\S+) ", dry_run["log"], re.M).group(1)
    dirs = library_path.split(":")
    assert dirs[0] == str(bundle / "lib")
    for name in ["attnzoo", "test_core", *binaries]:
        ldd = subprocess.run(["ldd", str(bundle / name)], capture_output=True, text=True,
                             env={**os.environ, "LD_LIBRARY_PATH": library_path}).stdout
        assert "not found" not in ldd, ldd
        for m in re.finditer(r"^\s*(\S+) => (/\S+) ", ldd, re.M):
            if not m.group(2).startswith(("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/")):
                assert os.path.dirname(m.group(2)) in dirs, (name, m.group(0), dirs)
            if m.group(1) in os.listdir(bundle / "lib"):
                assert m.group(2) == str(bundle / "lib" / m.group(1)), (name, m.group(0))
    # Every step of ours ran its binary: the device seam's tests pass, `info` says there is no CUDA device, the
    # cases run (each refused by the device's entries), the CUDA commands refuse the missing device by name.
    for name in ["info", "seam", "cases", *binaries]:
        assert steps[name]["exit"] == 0, runs.get(name)
    # The kernels' binaries ran at once, each its own section and record, in the order the steps list them; the
    # rest one by one after them.
    kernels = [b for b in binaries if b.startswith("test_kernels_")]
    assert kernels and len(kernels) < len(binaries)
    order = [s["step"] for s in dry_run["doc"]["steps"]]
    assert order[order.index("seam") + 1:][:len(binaries)] == kernels + [b for b in binaries if b not in kernels]
    for name in binaries:
        together = re.search(rf"^=== {name} \(limit \d+s\): .*\(beside the other kernel tests\)$", dry_run["log"], re.M)
        assert bool(together) == (name in kernels), name
    assert "cuda" in runs["info"] and "none" in runs["info"]
    assert "cases written to" in runs["cases"]
    for name in ("bench", "bench-model"):
        assert steps[name]["exit"] == 1 and "cuda:0 is not present" in runs[name], runs[name]


def test_the_python_steps_find_their_scripts_and_fail_at_torch(dry_run):
    steps, runs = dry_run["steps"], segments(dry_run["log"])
    for name in ("vs-torch", "bench-model-write", "hf-generate"):
        assert steps[name]["exit"] == 1 and HIDDEN in runs[name], runs.get(name)
    # No bench_cuda.json to measure the peers beside: skipped, and the log says why.
    assert steps["peers"]["exit"] is None and "no bench_cuda.json" in dry_run["log"]


def test_the_serving_proof_is_a_step_of_the_one_run(dry_run):
    """gpu_serve_check.sh runs inside gpu_check.sh's budget (issue 27: the whole check in one run under 8 minutes):
    its slice recorded as the step `serve`, its own steps each failing fast here (no nvidia-smi, no torch for the
    checkpoint, so no checkpoint for the server), its JSON in OUT_DIR with the proof's verdicts false, its log joined to
    gpu_check.log with each line marked, so its own step lines never read as the outer run's."""
    steps, log = dry_run["steps"], dry_run["log"]
    serve = steps["serve"]
    assert serve["exit"] == 1 and serve["limit"] == 120 and serve["timed_out"] is False, serve
    with open(dry_run["out"] / "gpu_serve.json") as f:
        doc = json.load(f)
    inner = {s["step"]: s["exit"] for s in doc["steps"]}
    assert list(inner) == ["device", "model-write", "serve-start"], inner
    assert all(rc not in (0, None) for rc in inner.values()), inner
    assert doc["proof"]["random_all_completed"] is False and doc["proof"]["prefix_ttft_speedup"] is None
    joined = log[log.index("=== serve: its gpu_serve.log"):].splitlines()[1:]
    marked = [line for line in joined if line.startswith("serve| ")]
    assert any(HIDDEN in line for line in marked), "the checkpoint's write did not reach torch"
    # No checkpoint without torch: the server refuses the missing path by name (its output joins the log too).
    assert any("attnzoo: error: model path not found" in line for line in marked), "no server error in the log"
    # The inner steps' "=== NAME (limit" lines appear only marked: unmarked, segments() would read the inner
    # `device` step as the outer one.
    assert not re.search(r"^=== model-write \(limit", log, re.M)
    assert len(re.findall(r"^=== device \(limit", log, re.M)) == 1
    assert any(line.startswith("serve| === device (limit") for line in marked)


def test_tests_json_lists_every_cuda_binary_with_its_gpu_tests_skipping(dry_run):
    with open(dry_run["out"] / "tests.json") as f:
        tests = json.load(f)
    binaries = cuda_test_binaries()
    assert sorted(tests) == sorted(["test_core", *binaries])
    for name in binaries:
        results = [t["result"] for suite in tests[name]["testsuites"] for t in suite["testsuite"]]
        assert tests[name]["failures"] == 0 and results, name
        assert "SKIPPED" in results, f"{name}: no GPU test skipped without a GPU"
    assert tests["test_core"]["tests"] > 0 and tests["test_core"]["failures"] == 0


def test_the_carried_gguf_joins_and_its_perplexity_is_recorded(dry_run):
    steps, runs = dry_run["steps"], segments(dry_run["log"])
    if not os.path.exists(GGUF):
        assert steps["gguf-perplexity-cpu"]["exit"] is None and steps["gguf-perplexity-cuda"]["exit"] is None
        assert dry_run["doc"]["gguf_perplexity"] is None
        pytest.skip(f"no {GGUF} (make setup fetches it): the steps were skipped, as the JSON says")
    if not os.path.exists(dry_run["bundle"] / "pg1661.txt"):
        pytest.skip("the bundle has no pg1661.txt (gpu_bundle.sh said why)")
    assert "digest matches" in dry_run["log"]
    assert steps["gguf-perplexity-cpu"]["exit"] == 0, runs["gguf-perplexity-cpu"]
    assert steps["gguf-perplexity-cuda"]["exit"] == 1 and "no GPU is usable" in runs["gguf-perplexity-cuda"]
    ppl = dry_run["doc"]["gguf_perplexity"]
    assert set(ppl) == {"cpu"} and 5 < ppl["cpu"] < 100, ppl  # SmolLM2 on Sherlock Holmes: about 22
    assert listing(dry_run["carry"]) == dry_run["carried"]  # the parts are read, not moved


def test_nothing_is_written_outside_out_dir(dry_run):
    files = set(os.listdir(dry_run["out"]))
    assert files <= OUT_FILES and len(files) <= 8, files
    # bench_cuda.json only from a bench that ran; gpu_serve.json from the serving step, whatever its outcome.
    assert files == {"gpu_check.log", "gpu_check.json", "tests.json", "gpu_serve.json"}
    for name in files:
        if name.endswith(".json"):
            with open(dry_run["out"] / name) as f:
                json.load(f)
    for where in ("tmp", "home", "cwd"):  # the work dir removed, nothing in HOME or the folder it ran from
        assert os.listdir(dry_run[where]) == [], (where, listing(dry_run[where]))


def test_a_step_the_budget_kills_is_recorded_and_the_rest_skipped(dry_run, tmp_path):
    """A hung driver: nvidia-smi ignoring SIGTERM, an 8 s budget. The first step is killed at its limit (SIGKILL
    after the SIGTERM), every later step is skipped, and both JSON files are still written."""
    fake = tmp_path / "bin"
    fake.mkdir()
    pid_file = tmp_path / "nvidia-smi.pid"
    (fake / "nvidia-smi").write_text(f"#!/bin/sh\necho $$ > {pid_file}\ntrap '' TERM\nexec sleep 300\n")
    (fake / "nvidia-smi").chmod(0o755)
    rc, stdout, out, tmp, home, cwd = run_check(tmp_path, dry_run["bundle"], "killed", 8, path_prefix=fake)
    assert rc == 0, stdout
    with open(out / "gpu_check.json") as f:
        doc = json.load(f)
    device, rest = doc["steps"][0], doc["steps"][1:]
    assert device["step"] == "device" and device["timed_out"] is True, device
    assert device["exit"] == 137 and device["seconds"] >= device["limit"], device  # SIGTERM was not enough
    assert f"=== device: exit 137 in {device['seconds']}s, killed at its limit of {device['limit']}s" in stdout
    assert [s["step"] for s in doc["steps"]] == [s["step"] for s in dry_run["doc"]["steps"]]
    assert all(s["exit"] is None for s in rest), [s for s in rest if s["exit"] is not None]
    with open(out / "tests.json") as f:
        tests = json.load(f)
    assert sorted(tests) == sorted(["test_core", *cuda_test_binaries()])
    assert all("no gtest JSON" in t["error"] for t in tests.values())
    assert not hung_sleep_alive(int(pid_file.read_text()))
    assert os.listdir(tmp) == [] and os.listdir(home) == [] and os.listdir(cwd) == []


def test_a_serve_slice_that_is_not_a_number_is_named_and_the_step_skipped(dry_run, tmp_path):
    """GPU_CHECK_SERVE_S=abc: bash arithmetic would read 0 and leave the step out unseen; the run says why and
    records `serve` as skipped, once. A 1 s budget: every other step is skipped too, so this takes seconds."""
    rc, stdout, out, *_ = run_check(tmp_path, dry_run["bundle"], "serve-nan", 1, env={"GPU_CHECK_SERVE_S": "abc"})
    assert rc == 0, stdout
    with open(out / "gpu_check.json") as f:
        steps = [s for s in json.load(f)["steps"] if s["step"] == "serve"]
    assert len(steps) == 1 and steps[0]["exit"] is None, steps
    assert "GPU_CHECK_SERVE_S='abc' is not a number of seconds" in (out / "gpu_check.log").read_text()
