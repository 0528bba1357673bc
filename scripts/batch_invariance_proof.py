"""Issue proof for batch-invariant numerics: N greedy requests (a shared system prompt, mixed prompt lengths) served
at concurrency C with prefix caching and chunked prefill on, against the same requests one at a time without a
prefix cache and against a repeat; with the mode off and on. Prints how many answers differ in each case.

    .venv/bin/python scripts/batch_invariance_proof.py [-m MODEL] [--requests 200] [--concurrency 16]
"""
import argparse
import os
import time

import attnzoo
from attnzoo.engine import LLM, SamplingParams
from attnzoo.model import Model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, ".models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=32)
    args = ap.parse_args()
    cached = Model.load(args.model)
    uncached = Model.load(args.model, enable_prefix_caching=False)
    tok = cached.tokenizer
    system = list(tok.encode("You are a careful assistant. Answer in one or two sentences, plainly. " * 8))
    topics = ["the sea", "prime numbers", "a red bicycle", "Paris in winter", "photosynthesis", "the moon",
              "a lost key", "jazz", "volcanoes", "an old library"]
    prompts = []
    for i in range(args.requests):
        q = f"Request {i}: write about {topics[i % len(topics)]}" + ", and why it matters" * (i % 7) + "."
        prompts.append(system + list(tok.encode(q)))
    params = SamplingParams(max_tokens=args.max_tokens, temperature=0)

    def serve(model, seqs):
        model.clear_prefix_cache()
        llm = LLM(model, max_num_seqs=seqs)
        try:
            t = time.perf_counter()
            outs = llm.generate(prompts, params)
            dt = time.perf_counter() - t
            return [o.outputs[0].token_ids for o in outs], sum(len(o.outputs[0].token_ids) for o in outs) / dt
        finally:
            llm.stop()

    cpu = attnzoo.cpu_info()
    print(f"{args.model}: {args.requests} requests, concurrency {args.concurrency}, {args.max_tokens} tokens each; "
          f"CPU {cpu.get('description', cpu)}; {attnzoo.num_threads()} threads")
    for on in (False, True):
        attnzoo.set_batch_invariant(on)
        alone, _ = serve(uncached, 1)
        loaded, rate = serve(cached, args.concurrency)
        llm = LLM(cached, max_num_seqs=args.concurrency)  # the repeat: every system prompt a cache hit
        try:
            repeat = [o.outputs[0].token_ids for o in llm.generate(prompts, params)]
        finally:
            llm.stop()
        differ = sum(a != b for a, b in zip(alone, loaded))
        differ_repeat = sum(a != b for a, b in zip(alone, repeat))
        print(f"batch_invariant={on}: answers differing from one-at-a-time: loaded {differ}/{len(prompts)}, "
              f"repeat {differ_repeat}/{len(prompts)}; loaded output {rate:.1f} tok/s")


if __name__ == "__main__":
    main()
