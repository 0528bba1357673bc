"""Writes a random Qwen3 model as a GGUF file for `attnzoo bench model`, every matrix in one format.

    .venv/bin/python scripts/make_bench_gguf.py FILE.gguf --type q4_0|q4_k|q5_k|q6_k|q8_0|iq4_nl|iq4_xs|bf16 [--seed 0]
        [--tiny]

The model is a random transformers Qwen3ForCausalLM of Qwen3-0.6B's shape with 24 layers (scripts/
make_bench_model.py: hidden 1024, 16 query / 8 kv heads of 128, intermediate 3072, vocabulary 151936, tied
embeddings, ~0.5B parameters), written the way llama.cpp's converter names Qwen3 tensors, with every matrix
(the token embedding, which is also the tied lm_head, included: llama-quantize --pure) in --type and norms in
F32. Q4_0 and Q8_0 come from the gguf package's quantizers; IQ4_NL and IQ4_XS, which it cannot quantize, from
quantize_iq4 here (nearest grid values under a max-abs scale, llama.cpp's search without its refinement); Q4_K,
Q5_K and Q6_K are random blocks with scales that keep the weights near the model's (the numbers a benchmark gets
do not depend on the values).
--tiny writes a 2-layer model of width 256 (tests).
"""
import argparse
import sys

import numpy as np

TYPES = ("q4_0", "q4_k", "q5_k", "q6_k", "q8_0", "iq4_nl", "iq4_xs", "bf16")
ROPE_THETA = 1000000.0
IQ4_GRID = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float32)


def _iq4_codes(x, scale):
    """Index of the grid value nearest to x / scale (x [..., 32], scale [..., 1]; scale 0 gives code 8, value 1 x 0;
    a value halfway between two takes the lower), by bisecting the midpoints: no [..., 16] distance array."""
    inv = np.divide(1, scale, out=np.zeros_like(scale), where=scale != 0)
    return np.searchsorted((IQ4_GRID[1:] + IQ4_GRID[:-1]) / 2, x * inv).astype(np.uint8)


def _pack_nibbles(codes):
    """[..., 32] codes -> [..., 16] bytes: element j in the low nibble of byte j, element j + 16 in its high."""
    return codes[..., :16] | (codes[..., 16:] << 4)


def _signed_max(x):
    """The element of largest magnitude along the last axis, sign kept (llama.cpp maps it onto the grid's -127)."""
    return np.take_along_axis(x, np.abs(x).argmax(-1)[..., None], -1)


def quantize_iq4(data, xs):
    """float32 [rows, cols] -> IQ4_NL blocks [rows, cols / 32 * 18] or, xs, IQ4_XS blocks [rows, cols / 256 * 136]:
    each 32 values scaled so that the one of largest magnitude lands on -127, every value then the nearest grid
    value; IQ4_XS rounds the eight sub-block scales to 6-bit multiples (-32..31) of one f16 d per 256."""
    rows, cols = data.shape
    x = data.reshape(rows, -1, 32).astype(np.float32)
    scale = (_signed_max(x) / np.float32(-127)).astype(np.float32)  # [rows, cols / 32, 1]
    if not xs:
        d = scale.astype(np.float16)
        codes = _iq4_codes(x, d.astype(np.float32))
        return np.concatenate([d.view(np.uint8), _pack_nibbles(codes)], -1).reshape(rows, -1)
    scale = scale.reshape(rows, -1, 8)
    d = (_signed_max(scale) / np.float32(-32)).astype(np.float16)  # [rows, cols / 256, 1]
    inv = np.divide(1, d.astype(np.float32), out=np.zeros(d.shape, np.float32), where=d != 0)
    ls = np.clip(np.rint(scale * inv), -32, 31).astype(np.int32) + 32  # [rows, cols / 256, 8], 0..63
    sub = (d.astype(np.float32) * (ls - 32).astype(np.float32))[..., None]
    codes = _iq4_codes(x.reshape(rows, -1, 8, 32), sub)
    scales_h = sum((ls[..., j] >> 4).astype(np.uint16) << (2 * j) for j in range(8)).astype(np.uint16)
    scales_l = ((ls[..., 0::2] & 0xF) | ((ls[..., 1::2] & 0xF) << 4)).astype(np.uint8)
    nb = cols // 256
    return np.concatenate([d.view(np.uint8), scales_h[..., None].view(np.uint8), scales_l,
                           _pack_nibbles(codes).reshape(rows, nb, 128)], -1).reshape(rows, -1)


def random_k(rows, cols, rng, std, five=False):
    """Random Q4_K blocks (f16 d, f16 dmin, 12 bytes of 6-bit scales / mins, 128 of nibbles) or, five, Q5_K blocks
    (the same with 32 bytes of fifth bits before the nibbles) whose values have roughly the given standard
    deviation."""
    blocks = rng.integers(0, 256, size=(rows, cols // 256, 176 if five else 144), dtype=np.uint8)
    # values 0..15 (0..31) times 6-bit scales (~32 on average): d * 32 * 4.6 (9.2, the values' deviation) ~ std
    d = (rng.uniform(0.8, 1.2, size=(rows, cols // 256)) * std / (32 * (9.2 if five else 4.6))).astype(np.float16)
    blocks[:, :, 0:2] = d.view(np.uint8).reshape(rows, cols // 256, 2)
    blocks[:, :, 2:4] = (d * np.float16(8)).view(np.uint8).reshape(rows, cols // 256, 2)
    return blocks.reshape(rows, -1)


def random_q6_k(rows, cols, rng, std):
    """Random Q6_K blocks (128 bytes of low nibbles, 64 of 2-bit highs, 16 int8 scales, f16 d) whose values have
    roughly the given standard deviation."""
    blocks = rng.integers(0, 256, size=(rows, cols // 256, 210), dtype=np.uint8)
    # codes 0..63 less 32 (deviation ~18.5) times int8 scales drawn in 16..127 (~80 on average)
    blocks[:, :, 192:208] = rng.integers(16, 128, size=(rows, cols // 256, 16), dtype=np.uint8)
    d = (rng.uniform(0.8, 1.2, size=(rows, cols // 256)) * std / (80 * 18.5)).astype(np.float16)
    blocks[:, :, 208:210] = d.view(np.uint8).reshape(rows, cols // 256, 2)
    return blocks.reshape(rows, -1)


def add_shape_metadata(w, cfg, head_dim):
    """The hyperparameters llama.cpp's converter writes for a Llama-family transformers config."""
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)


def config(tiny):
    import transformers
    if tiny:
        shape = dict(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=64)
    else:
        shape = dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=24,
                     num_attention_heads=16, num_key_value_heads=8, head_dim=128)
    return transformers.Qwen3Config(**shape, max_position_embeddings=40960, rope_theta=ROPE_THETA, rms_norm_eps=1e-6,
                                    tie_word_embeddings=True)


def write(path, ftype, seed=0, tiny=False):
    """Builds the random model and writes it to `path`; returns the transformers model (f32 values as drawn)."""
    import gguf
    import torch
    import transformers
    if ftype not in TYPES:
        raise ValueError(f"type: expected one of {', '.join(TYPES)}, got {ftype!r}")
    torch.manual_seed(seed)
    cfg = config(tiny)
    with torch.device("cpu"):
        model = transformers.Qwen3ForCausalLM(cfg).eval()
    rng = np.random.default_rng(seed)
    qtype = {"q4_0": gguf.GGMLQuantizationType.Q4_0, "q4_k": gguf.GGMLQuantizationType.Q4_K,
             "q5_k": gguf.GGMLQuantizationType.Q5_K, "q6_k": gguf.GGMLQuantizationType.Q6_K,
             "q8_0": gguf.GGMLQuantizationType.Q8_0, "iq4_nl": gguf.GGMLQuantizationType.IQ4_NL,
             "iq4_xs": gguf.GGMLQuantizationType.IQ4_XS, "bf16": gguf.GGMLQuantizationType.BF16}[ftype]
    w = gguf.GGUFWriter(path, "qwen3")
    add_shape_metadata(w, cfg, cfg.head_dim)
    w.add_rope_freq_base(ROPE_THETA)
    # llama_ftype: MOSTLY_IQ4_NL 25, MOSTLY_IQ4_XS 30
    w.add_file_type({"q4_0": 2, "q4_k": 15, "q5_k": 17, "q6_k": 18, "q8_0": 7, "iq4_nl": 25, "iq4_xs": 30,
                     "bf16": 32}[ftype])
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(cfg.vocab_size)])
    w.add_token_types([1] * cfg.vocab_size)
    # llama.cpp refuses a gpt2 tokenizer without merges ("cannot find tokenizer merges"), so `bench model
    # --llama-bench` could not load these files; one merge is enough, and no bench prompt is ever tokenized.
    w.add_token_merges(["t 1"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN3, cfg.num_hidden_layers)
    for name, t in model.state_dict().items():
        if "rotary_emb" in name or name == "lm_head.weight":  # tied: the token embedding is the lm_head
            continue
        new_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if new_name is None:
            raise RuntimeError(f"{name}: no GGUF name for it")
        data = np.ascontiguousarray(t.detach().float().numpy())
        if data.ndim < 2:
            w.add_tensor(new_name, data)
            continue
        if ftype in ("q4_k", "q5_k"):
            blocks = random_k(*data.shape, rng, float(data.std()), five=ftype == "q5_k")
        elif ftype == "q6_k":
            blocks = random_q6_k(*data.shape, rng, float(data.std()))
        elif ftype in ("iq4_nl", "iq4_xs"):
            blocks = quantize_iq4(data, xs=ftype == "iq4_xs")
        else:
            blocks = gguf.quants.quantize(data, qtype)
        w.add_tensor(new_name, blocks, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", help="the GGUF file to write")
    parser.add_argument("--type", required=True, choices=TYPES, help="format of every matrix")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model of width 256 (tests)")
    args = parser.parse_args(argv)
    model = write(args.file, args.type, args.seed, args.tiny)
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.file}: Qwen3, {n / 1e6:.0f}M parameters, matrices {args.type}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
