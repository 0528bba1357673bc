"""Writes a random ~0.5B-parameter checkpoint (bf16 safetensors) for `attnzoo bench model`.

    .venv/bin/python scripts/make_bench_model.py DIR [--arch qwen3|qwen3-next] [--experts N] [--seed 0]

qwen3-next: the same width and depth as a hybrid: 3 Gated DeltaNet layers per gated full-attention layer
(16 key / 16 value heads of 128, conv 4), dense MLPs instead of the MoE (622M parameters), so prefill can be
compared between the chunked kernels and `--linear-prefill=recurrent`. With `--experts N` every layer's MLP is
Qwen3-Next's MoE instead: N routed experts of 768, 2 per token, beside a gated shared expert of 1536, so a token
still passes through 3072 intermediate channels (the dense model's FLOPs; N=4: 736M parameters). llama.cpp's
qwen3next loads only this form (it refuses a model without experts), so `bench model --llama-bench` needs it.

Qwen3-0.6B's shape (hidden 1024, 28 -> 24 layers, 16 query / 8 kv heads of 128, intermediate 3072, vocabulary
151936, tied embeddings): the numbers a benchmark gets are those of a real small model, without downloading one.
The weights are random, so the text it generates is not. A tokenizer.json is written beside them (`attnzoo serve`
and `bench serve` need one): byte-level BPE without merges over the 256 byte symbols, then placeholder words `w0`,
`w1`, ... and `<|endoftext|>` up to the vocabulary size, so that every id the model can emit decodes.
"""
import argparse
import os
import sys


def write_tokenizer(directory, vocab_size):
    """A byte-level tokenizer.json whose vocabulary covers ids 0 .. vocab_size-1 (the last one `<|endoftext|>`)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    vocab = {symbol: i for i, symbol in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    while len(vocab) < vocab_size - 1:
        vocab[f"w{len(vocab)}"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>"])
    tok.save(os.path.join(directory, "tokenizer.json"))
    return tok


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", help="where to write config.json and model.safetensors")
    parser.add_argument("--arch", choices=["qwen3", "qwen3-next"], default="qwen3")
    parser.add_argument("--experts", type=int, default=0,
                        help="qwen3-next: routed experts per layer (0: dense MLPs; at least 2 otherwise)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.experts and (args.arch != "qwen3-next" or args.experts < 2):
        parser.error("--experts: only for --arch qwen3-next, and at least 2 (two are chosen per token)")
    import torch
    import transformers
    torch.manual_seed(args.seed)
    common = dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=24,
                  num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                  rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, dtype="bfloat16")
    if args.arch == "qwen3":
        config = transformers.Qwen3Config(**common)
    else:
        ffn = (dict(num_experts=args.experts, num_experts_per_tok=2, moe_intermediate_size=768,
                    shared_expert_intermediate_size=1536, norm_topk_prob=True, mlp_only_layers=[])
               if args.experts else dict(mlp_only_layers=list(range(24)), num_experts=0))
        config = transformers.Qwen3NextConfig(
            **common, full_attention_interval=4, linear_num_key_heads=16, linear_num_value_heads=16,
            linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
            partial_rotary_factor=0.25, **ffn)
    with torch.device("cpu"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    os.makedirs(args.directory, exist_ok=True)
    model.save_pretrained(args.directory, safe_serialization=True)
    write_tokenizer(args.directory, config.vocab_size)
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.directory}: {config.architectures[0] if config.architectures else args.arch}, "
          f"{n / 1e6:.0f}M parameters, bf16")
    return 0


if __name__ == "__main__":
    sys.exit(main())
