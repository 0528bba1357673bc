"""attnzoo conformance: every kernel family and every registered architecture against the references installed
beside this package (torch, fla's naive references, transformers, the gguf package, HF tokenizers; llama.cpp's
llama-perplexity when given), as one table of rows.

A check is a function of a Context returning rows; @check(area) registers it. A row says what was compared, the
worst error, the tolerance and the status: "pass" / "fail", or "skipped" with the reason (a reference that is not
installed, a transformers class this version lacks). A check that raises becomes a "fail" row naming the error, so
nothing is ever silently missing.
"""
import dataclasses
import importlib
import math
import time

import numpy as np

AREAS = ("softmax attention", "linear family", "state-space", "quantized formats", "tokenizer", "models")
_MODULES = ("softmax", "linear", "ssm", "quant", "tokenizer", "models")
_CHECKS = []  # (area, function), in registration order


class Missing(Exception):
    """A reference is absent: the check's rows become "skipped: <reason>"."""


@dataclasses.dataclass
class Context:
    quick: bool = True
    models: tuple = ()          # -m checkpoints (directories or .gguf files)
    llama_perplexity: str = None  # path of llama.cpp's llama-perplexity binary
    progress: object = None


def check(area, families):
    """Registers a check of `area` producing rows for `families` (named up front, so that a check that fails or
    is skipped as a whole still lists each family it covers)."""
    assert area in AREAS, area

    def register(fn):
        _CHECKS.append((area, tuple(families), fn))
        return fn
    return register


def require(module, what=None):
    """Imports `module` or raises Missing("<what> not installed")."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise Missing(f"{what or module.split('.')[0]} not installed ({e})") from None


def _to_numpy(x):
    if hasattr(x, "detach"):
        x = x.detach().double().numpy()
    return np.asarray(x, dtype=np.float64)


def worst_error(got, want, relative=True):
    """max |got - want|, divided by max |want| when `relative` (so one tolerance fits every scale); inf when the
    shapes differ or anything is not finite."""
    got, want = _to_numpy(got), _to_numpy(want)
    if got.shape != want.shape:
        return math.inf
    diff = np.abs(got - want)
    if diff.size == 0:
        return 0.0
    if not np.all(np.isfinite(diff)):
        return math.inf
    err = float(diff.max())
    return err / max(float(np.abs(want).max()), 1e-30) if relative else err


def row(area, family, compared, reference, error, tolerance, metric="max|Δ|/max|ref|"):
    """A compared row: pass iff error <= tolerance (a NaN or inf error fails)."""
    ok = error is not None and math.isfinite(error) and error <= tolerance
    return dict(area=area, family=family, compared=compared, reference=reference, metric=metric,
                worst_error=float(error), tolerance=float(tolerance), status="pass" if ok else "fail", reason="")


def compare(area, family, compared, reference, got, want, tolerance, relative=True):
    return row(area, family, compared, reference, worst_error(got, want, relative), tolerance,
               "max|Δ|/max|ref|" if relative else "max|Δ|")


def skipped(area, family, compared, reference, reason):
    return dict(area=area, family=family, compared=compared, reference=reference, metric="", worst_error=None,
                tolerance=None, status="skipped", reason=reason)


def failed(area, family, compared, reference, reason):
    return dict(area=area, family=family, compared=compared, reference=reference, metric="", worst_error=None,
                tolerance=None, status="fail", reason=reason)


def _load_areas():
    for name in _MODULES:  # each registers its checks
        importlib.import_module(f"{__name__}.{name}")


def run(ctx=None, areas=None):
    """Every registered check (or those of `areas`), as a list of rows."""
    ctx = ctx or Context()
    _load_areas()
    rows = []
    for area, families, fn in _CHECKS:
        if areas and area not in areas:
            continue
        if ctx.progress:
            ctx.progress(f"{area}: {fn.__name__}")
        start = time.perf_counter()
        try:
            got = list(fn(ctx))
        except Missing as e:
            got = [skipped(area, f, fn.__name__, "", f"skipped: {e}") for f in families]
        except Exception as e:  # a crash in a check is a failure of what it checks, named, never a lost row
            got = [failed(area, f, fn.__name__, "", f"{type(e).__name__}: {e}") for f in families]
        seconds = time.perf_counter() - start
        for r in got:
            r.setdefault("seconds", round(seconds / max(len(got), 1), 3))
        rows.extend(got)
    return rows
