"""Paged decode by hand: keys and values live in fixed-size blocks of a shared pool (vLLM / flash-attn layout),
a block table maps each sequence's positions to blocks, write_kv_paged scatters new rows into their slots and
attention_decode reads them back. The result equals attention over the same keys stored contiguously.

    python examples/paged_decode.py
"""
import numpy as np

import attnzoo

rng = np.random.default_rng(0)
Hq, Hkv, D, block_size, num_blocks = 8, 2, 64, 16, 32
lengths = [37, 5, 70]  # three sequences of different lengths share the pool

k_cache = np.zeros((num_blocks, block_size, Hkv, D), np.float32)
v_cache = np.zeros_like(k_cache)
free = list(rng.permutation(num_blocks))  # blocks in any order
blocks_per_seq = [-(-n // block_size) for n in lengths]
block_table = np.full((len(lengths), max(blocks_per_seq)), -1, np.int32)
for b, n in enumerate(blocks_per_seq):
    block_table[b, :n] = [free.pop() for _ in range(n)]

# Prefill: write every sequence's keys and values into its slots (slot = block * block_size + offset).
keys = [rng.standard_normal((n, Hkv, D)).astype(np.float32) for n in lengths]
values = [rng.standard_normal((n, Hkv, D)).astype(np.float32) for n in lengths]
for b, n in enumerate(lengths):
    pos = np.arange(n)
    slots = block_table[b, pos // block_size].astype(np.int64) * block_size + pos % block_size
    attnzoo.write_kv_paged(keys[b], values[b], slots, k_cache, v_cache)

# Decode one new query per sequence against its cached keys.
q = rng.standard_normal((len(lengths), Hq, D)).astype(np.float32)
out = attnzoo.attention_decode(q, k_cache, v_cache, np.array(lengths, np.int32), block_table=block_table)

for b, n in enumerate(lengths):  # the same attention over contiguous keys: the newest query sees every key
    want = attnzoo.attention(q[b][None, None], keys[b][None], values[b][None], causal=True)[0, 0]
    err = float(np.abs(out[b] - want).max())
    print(f"sequence {b}: {n} keys in blocks {block_table[b, :blocks_per_seq[b]].tolist()}, max |paged - contiguous| = {err:.1e}")
    assert err < 1e-5
