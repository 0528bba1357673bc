"""Which engine multiplies reduced-precision projections, in fresh processes under ATTNZOO_AMX / ATTNZOO_BF16_DOT:
AMX tiles wherever the CPU has them (whatever the vendor rule says of vdpbf16ps), vdpbf16ps where AMX is off and
it is preferred, f32 products otherwise. Observed through the engine's name, the per-engine count of bf16 GEMMs,
`attnzoo info`'s line and the product itself (bf16 products round x; widened ones equal "highest")."""
import json
import os
import subprocess
import sys

import pytest

import attnzoo
from attnzoo import _core

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

SCRIPT = r"""
import json, numpy as np, attnzoo
from attnzoo import _core, quant
BF16 = 30  # GGUF's type id
rng = np.random.default_rng(0)
x = rng.standard_normal((64, 96), dtype=np.float32)
w = (rng.standard_normal((48, 96), dtype=np.float32) * 0.5)
wb = quant.quantize(w, BF16)
before = _core.linear_bf16_gemm_counts()
attnzoo.set_float32_matmul_precision("medium")
fast = quant.matmul(x, wb, BF16, 48, 96)
attnzoo.set_float32_matmul_precision("highest")
exact = quant.matmul(x, wb, BF16, 48, 96)
after = _core.linear_bf16_gemm_counts()
print(json.dumps({"engine": _core.bf16_tiles_engine(), "amx": after[0] - before[0],
                  "dot": after[1] - before[1], "rounded": bool((fast != exact).any())}))
"""


def _cpu_has_amx():
    try:
        flags = next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split()
    except (OSError, StopIteration):
        return False
    return "amx_bf16" in flags and "amx_tile" in flags


def _run(amx, dot):
    env = dict(os.environ, ATTNZOO_AMX=amx, ATTNZOO_BF16_DOT=dot)
    env.pop("ATTNZOO_TARGET", None)
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("amx,dot", [("1", "0"), ("1", "1"), ("0", "1"), ("0", "0")])
def test_the_engine_named_is_the_engine_that_ran(amx, dot):
    bf16_target = "avx512_bf16" in attnzoo.supported_targets()
    got = _run(amx, dot)
    if amx == "1" and _cpu_has_amx() and bf16_target:
        want = "AMX tiles"
    elif dot == "1" and bf16_target:
        want = "vdpbf16ps"
    else:
        want = None
    if amx == "1" and not _cpu_has_amx():
        print("no AMX on this CPU: the AMX rows check the fallback only")
    assert got["engine"] == want, got
    assert (got["amx"], got["dot"]) == ((1, 0) if want == "AMX tiles" else (0, 1) if want else (0, 0)), got
    assert got["rounded"] == (want is not None), got


def test_bad_amx_value_is_named():
    env = dict(os.environ, ATTNZOO_AMX="yes")
    r = subprocess.run([sys.executable, "-c", "from attnzoo import _core; _core.bf16_tiles_engine()"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode != 0 and "ATTNZOO_AMX" in r.stderr
