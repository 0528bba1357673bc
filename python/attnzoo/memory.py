"""What each layer remembers per sequence: the one set of formulas for cache and state sizes.

Every tool that talks about memory (the explainer's figures, `attnzoo inspect`, admission control) should call
these functions instead of re-deriving the numbers. A layer's memory is described by LayerMemory:
bytes that grow with every token (a KV or latent cache), bytes that do not (a recurrent state, a conv tail),
and an optional bound on the tokens kept (a sliding-window ring buffer).

All sizes are per sequence and per layer; multiply by the batch for a batch. Byte counts match the tensors
the kernels read: softmax caches [T, Hkv, D] for K and [T, Hkv, Dv] for V, the MLA latent cache
[T, kv_lora_rank + qk_rope_head_dim], linear-family states [H, K, V] float32 and the short-conv tail
[channels, width - 1] float32 (attnzoo.linear.causal_conv1d's final_state).

These are not the engine's numbers: the engine sizes its own caches (always float32, rounded up to whole
allocation blocks) with the C++ CacheSpec of each mixer, which `attnzoo inspect` reports (also from a config
alone, `attnzoo inspect --config FILE`). The formulas here take any dtype, separate K / V head dims and
separate state / conv dtypes, which CacheSpec does not express, so they stay in Python for the explainer.
"""
from dataclasses import dataclass
from typing import Iterable, Optional

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8": 1, "int8": 1}


def dtype_bytes(dtype):
    """Bytes per element of a dtype name ('bfloat16'), a numpy / torch dtype, or an int (taken as is)."""
    if isinstance(dtype, int):
        return dtype
    name = str(dtype).replace("torch.", "").replace("numpy.", "")
    name = {"<f4": "float32", "<f2": "float16", "f4": "float32", "f2": "float16"}.get(name, name)
    if name not in DTYPE_BYTES:
        raise ValueError(f"dtype: unknown {dtype!r}; expected one of {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[name]


@dataclass(frozen=True)
class LayerMemory:
    kind: str
    bytes_per_token: int = 0          # grows with every token kept
    fixed_bytes: int = 0              # per sequence, whatever the length
    max_tokens: Optional[int] = None  # tokens kept at most (sliding window); None: all of them

    def tokens_kept(self, tokens):
        return tokens if self.max_tokens is None else min(tokens, self.max_tokens)

    def bytes_at(self, tokens):
        """Bytes this layer holds for one sequence of `tokens` tokens."""
        if tokens < 0:
            raise ValueError(f"tokens: must be >= 0, got {tokens}")
        return self.fixed_bytes + self.bytes_per_token * self.tokens_kept(tokens)


def _positive(**kw):
    for name, value in kw.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: must be a positive int, got {value!r}")


def softmax_kv(num_kv_heads, head_dim, v_head_dim=None, dtype="bfloat16", window=None, kind=None):
    """K and V caches of softmax attention: MHA (Hkv = Hq), GQA (Hkv < Hq), MQA (Hkv = 1); with `window` a
    ring buffer of the last `window` tokens (sliding-window attention)."""
    v_head_dim = head_dim if v_head_dim is None else v_head_dim
    _positive(num_kv_heads=num_kv_heads, head_dim=head_dim, v_head_dim=v_head_dim)
    if window is not None:
        _positive(window=window)
    per_token = num_kv_heads * (head_dim + v_head_dim) * dtype_bytes(dtype)
    return LayerMemory(kind or ("sliding window" if window else "softmax KV"), bytes_per_token=per_token,
                       max_tokens=window)


def mla_latent(kv_lora_rank, qk_rope_head_dim, dtype="bfloat16"):
    """MLA's cache: one latent of kv_lora_rank + qk_rope_head_dim per token, shared by all heads."""
    _positive(kv_lora_rank=kv_lora_rank, qk_rope_head_dim=qk_rope_head_dim)
    return LayerMemory("MLA latent", bytes_per_token=(kv_lora_rank + qk_rope_head_dim) * dtype_bytes(dtype))


def linear_state(num_heads, key_dim, value_dim, conv_channels=0, conv_width=0, state_dtype="float32",
                 conv_dtype="float32", kind="linear state"):
    """A linear-attention / delta-rule layer: the matrix state [H, K, V] plus the short-conv tail
    [conv_channels, conv_width - 1] (0 when the layer has no short convolution)."""
    _positive(num_heads=num_heads, key_dim=key_dim, value_dim=value_dim)
    if conv_channels < 0 or conv_width < 0:
        raise ValueError("conv_channels / conv_width: must be >= 0")
    state = num_heads * key_dim * value_dim * dtype_bytes(state_dtype)
    conv = conv_channels * max(conv_width - 1, 0) * dtype_bytes(conv_dtype)
    return LayerMemory(kind, fixed_bytes=state + conv)


def stack_bytes(layers: Iterable[LayerMemory], tokens):
    """Bytes a stack of layers holds for one sequence of `tokens` tokens."""
    return sum(layer.bytes_at(tokens) for layer in layers)


def hybrid_stack(linear: LayerMemory, softmax: LayerMemory, num_layers, linear_per_softmax=3):
    """The layers of a hybrid model that puts one softmax layer after every `linear_per_softmax` linear ones
    (Qwen3-Next, Kimi Linear: 3:1)."""
    _positive(num_layers=num_layers, linear_per_softmax=linear_per_softmax)
    period = linear_per_softmax + 1
    return [softmax if (i % period) == period - 1 else linear for i in range(num_layers)]
