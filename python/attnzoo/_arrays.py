"""Array plumbing shared by the Python wrappers: outputs in the caller's framework, checks on inputs."""
import numpy as np


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def empty_like_input(x, shape, dtype=None):
    """An uninitialised output of `shape` in x's framework (numpy or torch), x's dtype unless given."""
    if _is_torch(x):
        import torch
        return torch.empty(tuple(shape), dtype=dtype or x.dtype, device="cpu")
    return np.empty(tuple(shape), dtype=dtype or x.dtype)


_INT32_MIN, _INT32_MAX = -(2 ** 31), 2 ** 31 - 1


def as_input(x, name):
    """Numpy arrays and DLPack objects pass through (torch tensors are detached: kernels never track grads).

    A required argument: None is a TypeError naming it (optional arguments test for None before calling this).
    Numpy arrays in non-native byte order are refused here, by name, rather than read as garbage."""
    if x is None:
        raise TypeError(f"{name}: required, got None")
    if _is_torch(x):
        if x.device.type != "cpu":
            raise ValueError(f"{name}: must be a CPU tensor, got device {x.device}")
        return x.detach()
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)
    if isinstance(x, np.ndarray):
        if not x.dtype.isnative:
            raise ValueError(f"{name}: byte order '{x.dtype.byteorder}' ({x.dtype.str}) is not this machine's; "
                             f"convert with .astype(x.dtype.newbyteorder('='))")
        return x
    if hasattr(x, "__dlpack__"):
        return x
    raise TypeError(f"{name}: expected a numpy array or an object with __dlpack__, got {type(x).__name__}")


def as_output(x, name):
    """An array the kernel writes (out=, a state updated in place): as as_input, and writable. Numpy's
    read-only flag is checked here; torch tensors over read-only memory are caught by the binding, which probes
    the memory before writing."""
    x = as_input(x, name)
    if isinstance(x, np.ndarray) and not x.flags.writeable:
        raise ValueError(f"{name}: is read-only (written in place); pass a writable array")
    return x


def to_int32(x, name):
    """Integer ids / offsets / tables as int32, refusing (ValueError naming `name`) values that do not fit rather
    than wrapping them: 2**32 + 5 must not become 5."""
    x = as_input(x, name)
    if _is_torch(x):
        import torch
        if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
            raise TypeError(f"{name}: expected an integer tensor, got {x.dtype}")
        if x.dtype != torch.int32 and x.numel() > 0:
            lo, hi = int(x.min()), int(x.max())
            if lo < _INT32_MIN or hi > _INT32_MAX:
                raise ValueError(f"{name}: value {hi if hi > _INT32_MAX else lo} does not fit in int32")
        return x.to(torch.int32).contiguous()
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.integer):
        raise TypeError(f"{name}: expected an integer array, got {x.dtype}")
    if x.dtype != np.int32 and x.size > 0:
        lo, hi = int(x.min()), int(x.max())
        if lo < _INT32_MIN or hi > _INT32_MAX:
            raise ValueError(f"{name}: value {hi if hi > _INT32_MAX else lo} does not fit in int32")
    return np.ascontiguousarray(x, dtype=np.int32)


def as_f32_vector(x, name):
    if x is None:
        return None
    x = as_input(x, name)
    if _is_torch(x):
        import torch
        return x.to(torch.float32).contiguous()
    return np.ascontiguousarray(x, dtype=np.float32)


def as_i32_vector(x, name):
    """An optional integer array (cu_seqlens, cache_seqlens, block_table) as int32; see to_int32."""
    if x is None:
        return None
    return to_int32(x, name)


def shape_of(x):
    return tuple(int(s) for s in x.shape)


def check_finite(x, name):
    """Non-finite inputs make every result meaningless: refuse them up front."""
    if _is_torch(x):
        import torch
        ok = bool(torch.isfinite(x).all())
    else:
        ok = bool(np.isfinite(np.asarray(x, dtype=np.float32) if x.dtype.kind == "V" else x).all())
    if not ok:
        raise ValueError(f"{name}: contains NaN or Inf")
