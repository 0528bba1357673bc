"""The per-step mask cost of JSON mode and structured outputs on a real vocabulary (the figures in
docs/STRUCTURED_OUTPUTS.md): the recognizer states at every byte of one document, each state's trie walk and -inf
fill timed (mean and max over the states, the best of several passes), beside a plain pass over the logits row;
the mask before the per-DFA-state token sets of patterned strings (the whole trie walked there: "walk") and with
them ("sets") in alternating passes, and the first pass with the sets (which builds them) apart.

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
        bench.use_pattern_sets(True)
        kept = bench.pattern_set_bytes
        first = np.sum(bench.mask_each()) * 1e3
        kept = bench.pattern_set_bytes - kept
        each = {"walk": [], "sets": []}
        for p in range(passes):
            for form in (("walk", "sets") if p % 2 == 0 else ("sets", "walk")):
                bench.use_pattern_sets(form == "sets")
                each[form].append(bench.mask_each())
        each = {k: np.min(v, axis=0) * 1e3 for k, v in each.items()}
        reads = []
        for _ in range(passes):
            t = time.perf_counter()
            bench.read()
            reads.append((time.perf_counter() - t) / states * 1e3)
        print(f"  {name}: {states} states, plain row pass {min(reads):.4f} ms, allowed {bench.mask() / states:.0f} "
              f"tokens on average; first pass with the sets (building them: {kept / 2**20:.2f} MiB) "
              f"{first:.1f} ms in all")
        for form, t in each.items():
            print(f"    {form}: mask + fill {t.mean():.3f} ms mean, {t.max():.3f} ms max (at byte "
                  f"{int(t.argmax())}: {doc[:int(t.argmax())][-24:]!r})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".models/SmolLM2-135M-Instruct.Q4_1.gguf")
