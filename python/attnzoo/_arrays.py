"""Array plumbing shared by the Python wrappers: outputs in the caller's framework, checks on inputs."""
import operator

import numpy as np


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def empty_like_input(x, shape, dtype=None):
    """An uninitialised output of `shape` in x's framework (numpy or torch) and on x's device, x's dtype unless
    given."""
    if _is_torch(x):
        import torch
        return torch.empty(tuple(shape), dtype=dtype or x.dtype, device=x.device)
    return np.empty(tuple(shape), dtype=dtype or x.dtype)


def on_cuda(x):
    return _is_torch(x) and x.device.type == "cuda"


def cuda_stream_of(x):
    """The caller's current CUDA stream on x's device, as the integer handle the bindings take (0: host x)."""
    if not on_cuda(x):
        return 0
    import torch
    return torch.cuda.current_stream(x.device).cuda_stream


def scan_left_to_core(check_inputs, pairs):
    """check_inputs for CUDA tensors, done here by torch on their device (the bindings' scan reads host memory):
    returns whether the bindings must still scan (host arrays) or not (scanned here, or not asked for)."""
    if not check_inputs or not on_cuda(pairs[0][0]):
        return bool(check_inputs)
    import torch
    for x, name in pairs:
        if x is not None and x.is_floating_point() and not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name}: contains NaN or Inf (pass check_inputs=False to skip this check)")
    return False


_INT32_MIN, _INT32_MAX = -(2 ** 31), 2 ** 31 - 1
_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def in_callers_framework(x, out):
    """`out` (a numpy array) as the caller's framework: a torch tensor (sharing memory) when x is one."""
    if _is_torch(x):
        import torch
        return torch.from_numpy(out)
    return out


def as_input(x, name, cuda=False):
    """Numpy arrays and DLPack objects pass through. There is no autograd: torch tensors are read detached, and a
    tensor that requires grad gets a warning saying so (results never carry a grad_fn). CUDA tensors only where
    `cuda` (the functions whose kernels also run on a GPU: attention, attention_decode, the linear families'
    recurrent forms; their other forms refuse them by name in the kernel entry).

    A required argument: None is a TypeError naming it (optional arguments test for None before calling this).
    Numpy arrays in non-native byte order are refused here, by name, rather than read as garbage."""
    if x is None:
        raise TypeError(f"{name}: required, got None")
    if _is_torch(x):
        if x.device.type != "cpu" and not (cuda and x.device.type == "cuda"):
            raise ValueError(f"{name}: must be a CPU tensor, got device {x.device}"
                             + ("" if x.device.type != "cuda" else " (this function runs on the CPU only so far)"))
        if x.requires_grad:
            import warnings
            warnings.warn(f"{name}: requires grad, but attnzoo has no autograd: it is read detached and the "
                          "result has no grad_fn (inference only)", stacklevel=3)
        return x.detach()
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)
    if isinstance(x, np.ndarray):
        if not x.dtype.isnative:
            raise ValueError(f"{name}: byte order '{x.dtype.byteorder}' ({x.dtype.str}) is not this machine's; "
                             f"convert with .astype(x.dtype.newbyteorder('='))")
        return x
    if hasattr(x, "__dlpack__"):
        # DLPack device types: 1 CPU, 2 CUDA.
        kind = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else 1
        if kind != 1 and not (cuda and kind == 2):
            raise ValueError(f"{name}: lives on DLPack device type {kind}; "
                             + ("this function runs on the CPU only so far" if kind == 2 else "attnzoo reads CPU or CUDA memory"))
        return x
    raise TypeError(f"{name}: expected a numpy array or an object with __dlpack__, got {type(x).__name__}")


def optional_input(x, name, cuda=False):
    """as_input for an optional argument: None stays None."""
    return None if x is None else as_input(x, name, cuda)


def as_output(x, name, cuda=False):
    """An array the kernel writes (out=, a state updated in place): as as_input, and writable. Numpy's
    read-only flag is checked here; torch tensors over read-only memory are caught by the binding, which probes
    the memory before writing."""
    x = as_input(x, name, cuda)
    if isinstance(x, np.ndarray) and not x.flags.writeable:
        raise ValueError(f"{name}: is read-only (written in place); pass a writable array")
    return x


def to_int(x, name, bits=32):
    """Integer ids / offsets / tables as int32 (or int64), refusing (ValueError naming `name`) values that do not
    fit rather than wrapping them: 2**32 + 5 must not become 5."""
    lo_ok, hi_ok = (_INT32_MIN, _INT32_MAX) if bits == 32 else (_INT64_MIN, _INT64_MAX)
    x = _host_metadata(x)
    x = as_input(x, name)
    if _is_torch(x):
        import torch
        if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
            raise TypeError(f"{name}: expected an integer tensor, got {x.dtype}")
        target = torch.int64 if bits == 64 else torch.int32
        if x.dtype != target and x.numel() > 0:
            lo, hi = int(x.min()), int(x.max())
            if lo < lo_ok or hi > hi_ok:
                raise ValueError(f"{name}: value {hi if hi > hi_ok else lo} does not fit in int{bits}")
        return x.to(target).contiguous()
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.integer):
        raise TypeError(f"{name}: expected an integer array, got {x.dtype}")
    target = np.int64 if bits == 64 else np.int32
    if x.dtype != target and x.size > 0:
        lo, hi = int(x.min()), int(x.max())
        if lo < lo_ok or hi > hi_ok:
            raise ValueError(f"{name}: value {hi if hi > hi_ok else lo} does not fit in int{bits}")
    return np.ascontiguousarray(x, dtype=target)


def as_int(x, name, lo=_INT64_MIN, hi=_INT64_MAX):
    """A scalar integer argument as a Python int: bool, floats and strings are refused (TypeError naming `name`)
    rather than truncated (window=2.5 is no window of 2), and values outside [lo, hi] (int64's by default) refused
    (ValueError)."""
    if isinstance(x, bool) or not hasattr(x, "__index__"):
        raise TypeError(f"{name}: expected an int, got {type(x).__name__}")
    v = operator.index(x)
    if not lo <= v <= hi:
        raise ValueError(f"{name}: expected {lo} <= {name} <= {hi}, got {v}")
    return v


def to_int32(x, name):
    return to_int(x, name, 32)


def _host_metadata(x):
    """Offsets, tables, lengths, sinks and slopes are read on the host by every kernel (they plan the launch):
    a CUDA tensor of them is copied there (flash-attn takes them on the GPU; the copy waits for its stream)."""
    return x.cpu() if on_cuda(x) else x


def as_f32_vector(x, name):
    if x is None:
        return None
    x = as_input(_host_metadata(x), name)
    if _is_torch(x):
        import torch
        return x.to(torch.float32).contiguous()
    return np.ascontiguousarray(x, dtype=np.float32)


def as_int_array(x, name, bits=32):
    """An optional integer array (tables, lengths, slots) as contiguous int32 / int64; see to_int."""
    if x is None:
        return None
    return to_int(x, name, bits)


def as_i32_vector(x, name):
    """An optional integer array (cu_seqlens, cache_seqlens, block_table) as int32."""
    return as_int_array(x, name)


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
