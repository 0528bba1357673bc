"""What each layer remembers per sequence, as the engine counts it.

Every tool that talks about memory (the explainer's figures, `attnzoo inspect`, `bench model`) takes its numbers
from the C++ CacheSpec, the type the memory pool allocates from (`_core.cache_spec_kv`, `cache_spec_latent`,
`cache_spec_conv_state`, `CacheSpec.bytes_for`): this module only names the layer kinds and stacks them, it keeps
no byte formula of its own. A layer's memory has bytes that grow with every token (K/V, an MLA latent, stored in
the pool's KV dtype) and bytes that do not (a recurrent state with its short-conv tail, f32).

All sizes are per sequence and per layer; multiply by the batch for a batch. `bytes_at` counts tokens exactly
(block size 1); `bytes_at(tokens, block_tokens)` rounds the paged part up to whole pool blocks as the pool
holds it. A sliding-window layer here is the explainer's ring of the last `window` tokens.
"""
from dataclasses import dataclass
from typing import Iterable, Optional

from .. import _core


@dataclass(frozen=True)
class LayerMemory:
    kind: str
    spec: "_core.CacheSpec"
    max_tokens: Optional[int] = None  # tokens kept at most (sliding window); None: all of them

    @property
    def bytes_per_token(self):
        """Bytes every kept token adds."""
        return self.spec.bytes_per_token

    @property
    def fixed_bytes(self):
        """Bytes per sequence whatever its length (recurrent state, conv tail)."""
        return self.spec.fixed_bytes

    def tokens_kept(self, tokens):
        return tokens if self.max_tokens is None else min(tokens, self.max_tokens)

    def bytes_at(self, tokens, block_tokens=1):
        """Bytes this layer holds for one sequence of `tokens` tokens."""
        if tokens < 0:
            raise ValueError(f"tokens: must be >= 0, got {tokens}")
        return self.spec.bytes_for(self.tokens_kept(tokens), block_tokens)


def _positive(**kw):
    for name, value in kw.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: must be a positive int, got {value!r}")


def softmax_kv(num_kv_heads, head_dim, dtype="bfloat16", window=None, kind=None):
    """K and V caches of softmax attention: MHA (Hkv = Hq), GQA (Hkv < Hq), MQA (Hkv = 1); with `window` a
    ring buffer of the last `window` tokens (sliding-window attention)."""
    _positive(num_kv_heads=num_kv_heads, head_dim=head_dim)
    if window is not None:
        _positive(window=window)
    spec = _core.cache_spec_kv(num_kv_heads, head_dim, dtype, window or 0)
    return LayerMemory(kind or ("sliding window" if window else "softmax KV"), spec, max_tokens=window)


def mla_latent(kv_lora_rank, qk_rope_head_dim, dtype="bfloat16"):
    """MLA's cache: one latent of kv_lora_rank + qk_rope_head_dim per token, shared by all heads."""
    _positive(kv_lora_rank=kv_lora_rank, qk_rope_head_dim=qk_rope_head_dim)
    return LayerMemory("MLA latent", _core.cache_spec_latent(kv_lora_rank + qk_rope_head_dim, dtype))


def linear_state(num_heads, key_dim, value_dim, conv_channels=0, conv_width=0, kind="linear state"):
    """A linear-attention / delta-rule layer: the f32 matrix state [H, K, V] plus the short-conv tail
    [conv_channels, conv_width - 1] (0 when the layer has no short convolution), in one pool slot."""
    _positive(num_heads=num_heads, key_dim=key_dim, value_dim=value_dim)
    if conv_channels < 0 or conv_width < 0:
        raise ValueError("conv_channels / conv_width: must be >= 0")
    spec = _core.cache_spec_conv_state(conv_channels * max(conv_width - 1, 0), num_heads * key_dim * value_dim)
    return LayerMemory(kind, spec)


def stack_bytes(layers: Iterable[LayerMemory], tokens, block_tokens=1):
    """Bytes a stack of layers holds for one sequence of `tokens` tokens."""
    return sum(layer.bytes_at(tokens, block_tokens) for layer in layers)


def hybrid_stack(linear: LayerMemory, softmax: LayerMemory, num_layers, linear_per_softmax=3):
    """The layers of a hybrid model that puts one softmax layer after every `linear_per_softmax` linear ones
    (Qwen3-Next, Kimi Linear: 3:1)."""
    _positive(num_layers=num_layers, linear_per_softmax=linear_per_softmax)
    period = linear_per_softmax + 1
    return [softmax if (i % period) == period - 1 else linear for i in range(num_layers)]
