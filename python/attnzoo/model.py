"""Hugging Face causal language models on attnzoo's CPU kernels.

    m = Model.load("path/to/llama", dtype="float32")
    logits = m.forward(ids)                 # [T, vocab] float32 numpy, fresh cache
    seq = m.new_sequence()                  # keep a KV cache across calls
    m.forward(prompt[:17], seq=seq); m.forward(prompt[17:], seq=seq); m.forward([next_id], seq=seq)
    m.forward_batch([s1, s2], [ids1, ids2]) # ragged batch: several sequences at different stages

``dtype`` is the precision the projection weights are held in: "float32" (f32 and bf16 checkpoints are used
in place, zero copy), "bfloat16" (f32 weights rounded once to bf16) or "auto" (as the checkpoint is stored).
Activations and the KV cache are float32.
"""
import json
import os

import numpy as np

from . import _core
from ._arrays import to_int32

Sequence = _core.Sequence


def _ids(ids, name="ids"):
    """Token ids as int32; ids that do not fit are refused here, ids outside the vocabulary by the model."""
    x = to_int32(ids, name)
    if x.ndim != 1:
        raise ValueError(f"{name}: must be 1-D, got shape {x.shape}")
    return x


class Model:
    """A loaded checkpoint. Build with :meth:`Model.load`."""

    def __init__(self, core, directory):
        self._core = core
        self.directory = directory
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
            self.config = json.load(f)

    @classmethod
    def load(cls, directory, dtype="float32", kv_block_tokens=256):
        """kv_block_tokens: KV caches grow, and sliding-window caches drop old tokens, in blocks of this size."""
        directory = os.fspath(directory)
        return cls(_core.Model.load(directory, dtype, kv_block_tokens), directory)

    @property
    def vocab_size(self):
        return self._core.vocab_size

    def new_sequence(self):
        """An empty sequence whose caches persist across forward() calls."""
        return self._core.new_sequence()

    def forward(self, ids, seq=None, last_only=False):
        """Logits [len(ids), vocab] (or [1, vocab] with last_only) for ids appended to `seq` (a fresh one if None)."""
        if seq is None:
            seq = self._core.new_sequence()
        return self._core.forward(_ids(ids), seq, last_only)

    def forward_batch(self, seqs, ids, last_only=False):
        """One ragged batch: sequence i gets ids[i]. Returns one logits array per sequence."""
        arrays = [_ids(x, f"ids[{i}]") for i, x in enumerate(ids)]
        out = self._core.forward_batch(list(seqs), arrays, last_only)
        if last_only:
            return [out[i:i + 1] for i in range(len(arrays))]
        bounds = np.cumsum([0] + [len(a) for a in arrays])
        return [out[bounds[i]:bounds[i + 1]] for i in range(len(arrays))]

    @property
    def tokenizer(self):
        """The directory's tokenizer.json as an attnzoo Tokenizer (None when the directory has none)."""
        if not hasattr(self, "_tokenizer"):
            from .tokenizer import Tokenizer
            path = os.path.join(self.directory, "tokenizer.json")
            self._tokenizer = Tokenizer.load(path) if os.path.exists(path) else None
        return self._tokenizer

    def generate(self, prompt_or_ids, max_new_tokens=128, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0,
                 repetition_penalty=1.0, seed=0, stop=None, stream=None, **kwargs):
        """Continue a prompt: ids in -> the new ids out; text in -> the new text out (needs tokenizer.json).

        temperature=0 is greedy. Other arguments (presence_penalty, frequency_penalty, eos_token_id) as in
        attnzoo.generate.generate, which this calls with the directory's tokenizer.
        """
        from .generate import generate
        return generate(self, self.tokenizer, prompt_or_ids, max_new_tokens=max_new_tokens,
                        temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                        repetition_penalty=repetition_penalty, seed=seed, stop=stop, stream=stream, **kwargs)

    def trace(self, ids):
        """What each layer computed for `ids` run as a fresh sequence (explainer hook; short prompts).

        One dict per layer: "kind"; softmax attention adds "q" [T, heads, head_dim] and "k" [T, kv_heads,
        head_dim] exactly as the kernel saw them (after q/k norm and RoPE) with "scale", "window", "softcap" and
        "sinks"; recurrent layers may add "state_norms" (per head, after the prompt).
        """
        return self._core.trace(_ids(ids))

    def inspect(self):
        """Architecture, layer kinds, parameter count, weight bytes and per-sequence cache bytes."""
        return self._core.inspect()

    def __repr__(self):
        info = self.inspect()
        return f"Model({info['architecture']}, {info['num_layers']} layers, {info['parameter_count']} parameters)"
