"""Argument plumbing shared by the linear-family wrappers (_delta, _gla, _ssm).

The order every wrapper follows: take the arrays as they are (no copy), check their layouts against each other,
then make them contiguous, then scan values. Copying or scanning first would let a malformed call cost time and
memory in proportion to what the arrays claim to hold: a stride-0 view of 880M elements takes seconds and
gigabytes to copy, and must fail on its shape at once.
"""
import numpy as np

from .._arrays import _is_torch, as_input, as_output, check_finite, shape_of


def check_layouts(specs, dims=None):
    """Checks arrays' shapes against named layouts before anything touches their values.

    specs: (name, array or None, layout) triples; a layout is a space-separated list of dimension symbols, or
    several separated by '|' (the first that fits is taken). A symbol binds to the size it first meets and must
    match it everywhere after; digits are literal sizes. `dims` seeds known sizes. Returns the bound sizes.
    ValueError names the argument, its expected layout and the size it disagrees with."""
    dims = dict(dims or {})
    origin = {s: "the arguments" for s in dims}
    for name, x, layout in specs:
        if x is None:
            continue
        shape = shape_of(x)
        reasons = []
        for alternative in layout.split("|"):
            symbols = alternative.split()
            bound, why = _bind(symbols, shape, dims, origin)
            if why is None:
                for s, n in bound.items():
                    origin.setdefault(s, name)
                dims.update(bound)
                break
            reasons.append(why)
        else:
            wanted = " or ".join("[" + ", ".join(a.split()) + "]" for a in layout.split("|"))
            raise ValueError(f"{name}: expected shape {wanted}, got {list(shape)} ({'; '.join(reasons)})")
    return dims


def _bind(symbols, shape, dims, origin):
    if len(symbols) != len(shape):
        return None, f"{len(shape)} dims instead of {len(symbols)}"
    bound = {}
    for s, n in zip(symbols, shape):
        if s.isdigit():
            if n != int(s):
                return None, f"a dimension of {n} where {s} is needed"
            continue
        want = bound.get(s, dims.get(s))
        if want is not None and want != n:
            return None, f"{s} = {n}, but {s} = {want} in {origin.get(s, 'this argument')}"
        bound[s] = n
    return bound, None


def num_seqs(batch, cu_seqlens):
    """Sequences in a call: the batch, or len(cu_seqlens) - 1 for packed sequences."""
    return batch if cu_seqlens is None else max(int(shape_of(cu_seqlens)[0]) - 1, 0)


def contiguous(x):
    """x itself when already contiguous, else a contiguous copy in its framework (None passes through)."""
    if x is None:
        return None
    if _is_torch(x):
        return x.contiguous()
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x)
    return x


def is_float(x):
    return x.is_floating_point() if _is_torch(x) else np.asarray(x).dtype.kind in "fV"


def scan(x, name, check=True):
    """The NaN / Inf scan of one (already shape-checked) input; nothing for None or non-float arrays."""
    if check and x is not None and is_float(x):
        check_finite(x, name)
    return x


def float32_state(x, name):
    """States travel as contiguous float32 (a copy when the caller's dtype or layout differs); non-float arrays are
    left for the kernel to refuse by name."""
    if x is None:
        return None
    if not is_float(x):
        return contiguous(x)
    if _is_torch(x):
        import torch
        return x.to(torch.float32).contiguous()
    return np.ascontiguousarray(x, dtype=np.float32)


def empty_f32(like, shape):
    """An uninitialised float32 array of `shape` in like's framework, on its device."""
    if _is_torch(like):
        import torch
        return torch.empty(tuple(shape), dtype=torch.float32, device=like.device)
    return np.empty(tuple(shape), dtype=np.float32)


def in_place_state(s, name="initial_state", flag="inplace_final_state=True", cuda=False):
    """The caller's float32 contiguous state buffer itself, refused (ValueError / TypeError naming it) when it
    would have to be copied: an in-place update of a copy would be lost."""
    if s is None:
        raise ValueError(f"{name}: {flag} needs the state buffer to update")
    s = as_output(s, name, cuda)
    if _is_torch(s):
        import torch
        if s.dtype != torch.float32:
            raise TypeError(f"{name}: {flag} needs float32, got {s.dtype}")
        if not s.is_contiguous():
            raise ValueError(f"{name}: {flag} needs a contiguous tensor")
        return s
    if not isinstance(s, np.ndarray):
        return s  # another DLPack producer, viewed as it is: the kernel refuses a wrong dtype or layout by name
    if s.dtype != np.float32:
        raise TypeError(f"{name}: {flag} needs float32, got {s.dtype}")
    if not s.flags.c_contiguous or not s.flags.writeable:
        raise ValueError(f"{name}: {flag} needs a writeable C-contiguous array")
    return s


def optional_input(x, name, cuda=False):
    """An optional argument taken as it is (no copy): None stays None."""
    return None if x is None else as_input(x, name, cuda)
