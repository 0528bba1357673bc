"""The GPU run's torch comparison, kept honest on the CPU: `attnzoo bench kernels --write-cases DIR` runs the
softmax entries on seeded cases (ragged varlen prefill, bottom-right causal, windows, softcap, sinks, ALiBi, paged
decode over bf16 / int8 / fp8 caches at block sizes 16 and 64) and scripts/check_vs_torch.py recomputes each with
torch. On the GPU machine the same two commands check the CUDA kernels against torch there; here they check the
CPU kernels, and that the script fails where it should.

The CLI binary is $ATTNZOO_CLI, else build/attnzoo of this checkout."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("ATTNZOO_CLI", os.path.join(ROOT, "build", "attnzoo"))
SCRIPT = os.path.join(ROOT, "scripts", "check_vs_torch.py")
pytestmark = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"attnzoo CLI not built at {CLI}")


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    d = tmp_path_factory.mktemp("cases")
    r = subprocess.run([CLI, "bench", "kernels", "--write-cases", str(d), "--device", "cpu"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "9 cases written" in r.stdout and "0 refused" in r.stdout, r.stdout
    return d


def check(d, *extra):
    return subprocess.run([sys.executable, SCRIPT, str(d), *extra], capture_output=True, text=True, timeout=300)


def copy_cases(src, dst):
    for name in os.listdir(src):
        with open(os.path.join(src, name), "rb") as f, open(os.path.join(dst, name), "wb") as g:
            g.write(f.read())
    return dst


def test_every_cpu_case_matches_torch(cases, tmp_path):
    r = check(cases, "--json", str(tmp_path / "rows.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads((tmp_path / "rows.json").read_text())["rows"]
    assert len(rows) == 9 and all(row["ok"] for row in rows)
    kinds = {row["name"].split("_")[0] for row in rows}
    assert kinds == {"prefill", "decode"}
    # torch's own fused attention is compared where it can express the case (no softcap, no sinks).
    assert rows[0]["sdpa_max_err"] is not None


def test_a_wrong_output_fails_by_name(cases, tmp_path):
    d = copy_cases(cases, tmp_path)
    out = np.load(d / "decode_bf16_bs16_out.npy")
    out[3, 0, 5, 17] += 0.5  # one element of the last sequence's output
    np.save(d / "decode_bf16_bs16_out.npy", out)
    r = check(d)
    assert r.returncode == 1
    assert "decode_bf16_bs16" in r.stderr and "| decode_bf16_bs16 | ok |" in r.stdout and "| NO |" in r.stdout


def test_a_refused_case_fails(cases, tmp_path):
    d = copy_cases(cases, tmp_path)
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["cases"][1].update(status="refused", error="q: head dim 64 is not built for this device")
    (d / "manifest.json").write_text(json.dumps(manifest))
    r = check(d)
    assert r.returncode == 1 and "head dim 64 is not built" in r.stdout


def test_write_cases_needs_a_directory():
    r = subprocess.run([CLI, "bench", "kernels", "--write-cases"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--write-cases" in r.stderr
