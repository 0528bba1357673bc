"""Attention maps from a model: Model.trace returns, per softmax layer, q and k exactly as the kernel saw them
(after q/k norm and RoPE) with the layer's scale / window / softcap / sinks; the maps are their softmax under
that mask. This is what `attnzoo explain -m DIR` draws in its section "Inside a model".

    python examples/attention_maps.py [MODEL_DIR] [PROMPT]
"""
import sys

import numpy as np

import attnzoo
from attnzoo.explain.inside_model import attention_maps
from _tiny_model import has_tokenizer, model_dir

directory = model_dir(sys.argv[:2])
m = attnzoo.Model.load(directory)
prompt = sys.argv[2] if len(sys.argv) > 2 else "The quick brown fox jumps over the lazy dog"
if has_tokenizer(directory):
    ids = m.tokenizer.encode(prompt)
    labels = [m.tokenizer.decode([i]) for i in ids]
else:
    ids = np.arange(1, 12)
    labels = [str(i) for i in ids]

for layer, t in enumerate(m.trace(ids)):
    if "q" not in t:  # recurrent layers (linear attention, SSMs) have no map
        print(f"layer {layer}: {t['kind']} (no attention map)")
        continue
    maps = attention_maps(t)  # [heads, T, T], rows sum to 1 (without sinks)
    last = maps[:, -1]  # what the last token looks at, per head
    top = [labels[int(j)] for j in last.argmax(-1)]
    print(f"layer {layer}: {maps.shape[0]} heads; the last token attends most to {top}")
