"""Generation from Python: text in, text out with the checkpoint's tokenizer (or ids in, ids out without one),
greedy or sampled, streamed, a list of prompts in one call (batched by the serving engine), and several prompts
through one ragged batch by hand with Model.forward_batch. Sampling defaults to the checkpoint's
generation_config.json, as `attnzoo generate` (greedy unless it sets do_sample); arguments override it.

    python examples/generate.py [MODEL_DIR] [PROMPT]
"""
import sys

import numpy as np

import attnzoo
from _tiny_model import has_tokenizer, model_dir

directory = model_dir(sys.argv[:2])
m = attnzoo.Model.load(directory)
if has_tokenizer(directory):
    prompt = sys.argv[2] if len(sys.argv) > 2 else "The capital of France is"
    print(repr(m.generate(prompt, max_new_tokens=16)))  # greedy
    m.generate(prompt, max_new_tokens=16, temperature=0.8, top_p=0.95, seed=1,
               stream=lambda piece: print(piece, end="", flush=True))
    print()
else:
    prompt = [1, 2, 3, 4]
    print("greedy:", m.generate(prompt, max_new_tokens=8))
    print("sampled:", m.generate(prompt, max_new_tokens=8, temperature=0.8, top_k=20, seed=1))
# A list of prompts: one answer each, as each would get alone.
print("list:", m.generate([[1, 2, 3, 4], [5, 6]], max_new_tokens=6, do_sample=False))

# Greedy decoding of two id prompts side by side: each step is one ragged batch (prefill rows and decode rows).
prompts = [np.array([1, 2, 3, 4]), np.array([5, 6])]
seqs = [m.new_sequence() for _ in prompts]
feed, outs = prompts, [[] for _ in prompts]
for _ in range(6):
    logits = m.forward_batch(seqs, feed, last_only=True)
    feed = [np.array([int(row[-1].argmax())]) for row in logits]
    for o, f in zip(outs, feed):
        o.append(int(f[0]))
print("batched greedy:", outs)
