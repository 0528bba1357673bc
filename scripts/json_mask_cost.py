"""The per-step mask cost of JSON mode and structured outputs on a real vocabulary (the figures in
docs/STRUCTURED_OUTPUTS.md): the recognizer states at every byte of one document, each state's trie walk and -inf
fill timed (mean and max over the states, the best of several passes), beside a plain pass over the logits row.

    .venv/bin/python scripts/json_mask_cost.py .models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import sys
import time

import numpy as np

from attnzoo import _core
from attnzoo.bench.json_mask import CASES
from attnzoo.tokenizer import Tokenizer


def main(path, passes=7):
    tok = Tokenizer.load(path)
    t0 = time.perf_counter()
    token_bytes = _core.token_bytes_in_context(tok._native, tok.vocab_size)
    bench = _core.JsonMaskBench(token_bytes)
    print(f"{path}: {len(token_bytes)} tokens, {bench.string_plain_tokens} take a free string as they are; "
          f"bytes + trie {time.perf_counter() - t0:.2f} s")
    for name, schema, text in CASES:
        doc = text.encode()
        states = bench.prepare(schema, doc)
        each = np.min([bench.mask_each() for _ in range(passes)], axis=0) * 1e3
        reads = []
        for _ in range(passes):
            t = time.perf_counter()
            bench.read()
            reads.append((time.perf_counter() - t) / states * 1e3)
        print(f"  {name}: {states} states, mask + fill {each.mean():.3f} ms mean, {each.max():.3f} ms max "
              f"(at byte {int(each.argmax())}: {doc[:int(each.argmax())][-24:]!r}); plain row pass "
              f"{min(reads):.4f} ms; allowed {bench.mask() / states:.0f} tokens on average")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".models/SmolLM2-135M-Instruct.Q4_1.gguf")
