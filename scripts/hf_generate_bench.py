"""transformers' greedy `generate` at one batch size over random prompts: decode tokens/s (issue 27's batch-64 peer).

    python3 scripts/hf_generate_bench.py DIR [--batch 64] [--context 1024] [--new 16] [--device cuda]

The prompts are `--context` random ids each; decode time is generate(prompt, 1 + new tokens) less
generate(prompt, 1 token) (the prefill and its first token), so tokens/s counts batch x new decoded tokens, the
count `attnzoo bench model --device cuda` reports for its rows. One JSON line on stdout.
"""
import argparse
import json
import sys
import time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", help="a Hugging Face checkpoint (make_bench_model.py writes one)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--new", type=int, default=16, help="decoded tokens per sequence after the first")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    if args.batch < 1 or args.context < 1 or args.new < 1:
        parser.error("--batch, --context and --new must be >= 1")
    import torch
    import transformers
    model = transformers.AutoModelForCausalLM.from_pretrained(args.directory, dtype=torch.bfloat16)
    model = model.to(args.device).eval()
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (args.batch, args.context), generator=gen).to(args.device)
    mask = torch.ones_like(ids)

    def generate(n):
        # min_new_tokens: random weights may pick the end-of-text id, which must not end a row early.
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                 pad_token_id=0)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        assert out.shape == (args.batch, args.context + n), out.shape
        return time.perf_counter() - t0

    generate(2)  # warm-up: kernels chosen and loaded
    first = min(generate(1) for _ in range(2))
    total = generate(1 + args.new)
    decode_s = max(total - first, 1e-9)
    print(json.dumps({"peer": "transformers.generate", "transformers": transformers.__version__,
                      "torch": torch.__version__, "device": args.device, "batch": args.batch,
                      "context": args.context, "new_tokens": args.new, "prefill_s": first, "decode_s": decode_s,
                      "tokens_per_s": args.batch * args.new / decode_s}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
