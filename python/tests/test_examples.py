"""Every script in examples/ runs as a user would run it (no arguments: the scripts build a tiny random model
themselves) and checks its own result (paged == contiguous, prompt + steps == one pass, ...)."""
import glob
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPTS = sorted(p for p in glob.glob(os.path.join(ROOT, "examples", "*.py"))
                 if not os.path.basename(p).startswith("_"))


def test_the_examples_are_all_here():
    names = {os.path.basename(p) for p in SCRIPTS}
    assert {"attention_maps.py", "paged_decode.py", "linear_attention_module.py", "generate.py"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=os.path.basename)
def test_example_runs(script, tmp_path):
    r = subprocess.run([sys.executable, script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert r.stdout.strip()
