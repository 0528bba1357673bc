"""attnzoo conformance as a user runs it (the CLI handing over to python -m attnzoo.conformance, --quick, --json):
every kernel family of README's table and every architecture of the registry is a row, every row carries its worst
error, tolerance and status, and everything passes or is skipped with a reason; the row logic fails a wrong
reference, a crash and a NaN, and turns an absent reference into a skipped row."""
import json
import math
import os
import subprocess

import numpy as np
import pytest

import attnzoo
from attnzoo import _core, conformance as C
from attnzoo.conformance import report as report_format

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("ATTNZOO_CLI", os.path.join(ROOT, "build", "attnzoo"))

# The kernel families of README's "Supported today" table, named here independently of the package's registry.
FAMILIES = ["softmax prefill", "softmax decode", "KV cache writes", "quantized KV cache", "MLA", "LSH attention",
            "linear attention", "retention", "simple GLA", "GLA", "DeltaNet", "Gated DeltaNet", "KDA", "RWKV-7",
            "Mamba", "Mamba-2", "RWKV-4", "causal conv1d", "S4D / DSS", "BPE training", "tokenizer (encode)",
            "quantization"] + [f"{f} weights" for f in ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
                                                        "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "MXFP4", "IQ4_NL",
                                                        "IQ4_XS")]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"attnzoo CLI not built at {CLI}")
    out = tmp_path_factory.mktemp("conformance") / "report.json"
    html = out.with_suffix(".html")
    r = subprocess.run([CLI, "conformance", "--quick", "-q", "--json", str(out), "--html", str(html)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "Traceback" not in r.stderr
    with open(out, encoding="utf-8") as f:
        data = json.load(f)
    data["stdout"], data["html"] = r.stdout, html.read_text(encoding="utf-8")
    return data


def test_every_family_and_architecture_is_a_row(report):
    families = {r["family"] for r in report["rows"]}
    missing = [f for f in FAMILIES + list(_core.supported_architectures()) if f not in families]
    assert not missing, missing
    assert len(_core.supported_architectures()) >= 30  # the registry really was read


def test_every_row_is_complete_and_passes_or_says_why_not(report):
    for r in report["rows"]:
        assert r["status"] in ("pass", "skipped"), r
        assert r["compared"] and r["area"] in C.AREAS, r
        if r["status"] == "skipped":
            assert r["reason"].startswith("skipped: ") and len(r["reason"]) > 20, r
            continue
        assert r["reference"] and r["metric"], r
        assert math.isfinite(r["worst_error"]) and r["tolerance"] >= 0 and r["worst_error"] <= r["tolerance"], r
    # The references installed with the test environment are all used: only what cannot be checked is skipped.
    skipped = {r["family"] for r in report["rows"] if r["status"] == "skipped"}
    assert skipped <= {"RWKV7ForCausalLM", "checkpoints (-m)", "llama.cpp perplexity"}, skipped


def test_table_json_and_html_agree(report):
    rows = report["rows"]
    assert report_format.summary(rows) == report["summary"] and report["summary"] in report["stdout"]
    assert report["mode"] == "quick" and report["attnzoo"] == attnzoo.__version__
    assert report["html"].count("<tr style=") == len(rows)


def test_wrong_reference_fails():
    torch = pytest.importorskip("torch")
    from attnzoo.conformance.softmax import torch_attention
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 20, 2, 16, generator=g) for _ in range(3))
    got = attnzoo.attention(q, k, v)
    right = C.compare("softmax attention", "softmax prefill", "x", "torch", got, torch_attention(torch, q, k, v), 1e-5)
    wrong = C.compare("softmax attention", "softmax prefill", "x", "torch (wrong scale)", got,
                      torch_attention(torch, q, k, v, scale=0.5), 1e-5)
    assert right["status"] == "pass" and wrong["status"] == "fail" and wrong["worst_error"] > 1e-2


def test_row_logic_edges():
    a = np.ones((3, 4))
    assert C.compare("models", "f", "x", "r", a, a, 0.0)["status"] == "pass"
    assert C.compare("models", "f", "x", "r", a + 1e-3, a, 1e-4, relative=False)["status"] == "fail"
    assert C.compare("models", "f", "x", "r", np.full((3, 4), np.nan), a, 1.0)["status"] == "fail"
    assert C.compare("models", "f", "x", "r", a[:2], a, 1.0)["status"] == "fail"  # a shape mismatch


def test_crash_fails_and_absent_reference_skips(monkeypatch):
    def absent(ctx):
        C.require("attnzoo_no_such_reference_package", "the reference")

    def crashes(ctx):
        raise RuntimeError("kernel exploded")

    monkeypatch.setattr(C, "_CHECKS", [("models", ("a", "b"), absent), ("models", ("c",), crashes)])
    monkeypatch.setattr(C, "_MODULES", ())
    rows = C.run(C.Context())
    assert [(r["family"], r["status"]) for r in rows] == [("a", "skipped"), ("b", "skipped"), ("c", "fail")]
    assert rows[0]["reason"].startswith("skipped: the reference not installed")
    assert "kernel exploded" in rows[2]["reason"]
