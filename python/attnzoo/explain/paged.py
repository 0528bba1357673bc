"""Section 4 - PagedAttention: block tables, shared prefixes, copy-on-write, fragmentation.

The tables drawn are the ones attnzoo.explain.paging built and attnzoo.attention_decode then read (block_table=...);
the page prints the paged result against contiguous caches filled from the same tokens.
"""
import numpy as np

from .. import attention_decode
from . import memory
from .paging import PagedKVCache
from .page import Section, animated_figure, figure, table
from .svg import class_grid, esc, human_bytes, legend, svg, text

ID = "paged-attention"
TITLE = "4. PagedAttention"

SEQ_CLASSES = {"A": "c1", "B": "c2", "C": "c3"}
HKV, D, HQ = 2, 16, 4


def _frame(snap, num_blocks, block_size, caption_event):
    cell, gap = 22, 4
    body = [text(4, 14, "block tables (logical block -> physical block)", "big")]
    y = 30
    for s, t in snap["tables"].items():
        n = snap["lengths"][s]
        body.append(text(4, y + 15, f"{s} ({n} tok)", ""))
        for i, b in enumerate(t):
            x = 70 + i * (cell + gap)
            used = min(block_size, n - i * block_size)
            body.append(f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" class="c0"/>')
            body.append(f'<rect x="{x}" y="{y + cell * (1 - used / block_size):.1f}" width="{cell}" '
                        f'height="{cell * used / block_size:.1f}" class="{SEQ_CLASSES.get(s, "c5")}" '
                        f'fill-opacity="0.55"/>')
            body.append(text(x + cell / 2, y + 15, str(b), "", "middle"))
        y += cell + 8
    y += 14
    body.append(text(4, y, "physical blocks (number = reference count)", "big"))
    y += 8
    refs = snap["ref_counts"]
    owners = {}
    for s, t in snap["tables"].items():
        for b in t:
            owners.setdefault(b, []).append(s)
    for b in range(num_blocks):
        x = 4 + b * (cell + 2)
        r = int(refs[b])
        cls = "c0" if r == 0 else ("c4" if r > 1 else SEQ_CLASSES.get(owners[b][0], "c5"))
        body.append(f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" class="{cls}" '
                    f'fill-opacity="{0.35 if r == 0 else 0.8}"><title>block {b}: refcount {r}'
                    f'{" (" + ", ".join(owners.get(b, [])) + ")" if r else " (free)"}</title></rect>')
        body.append(text(x + cell / 2, y + 15, str(r) if r else "", "", "middle"))
        body.append(text(x + cell / 2, y + cell + 10, str(b), "small", "middle"))
    y += cell + 26
    body.append(legend([("c1", "A only"), ("c2", "B only"), ("c3", "C only"), ("c4", "shared")], 4, y))
    return svg(max(4 + num_blocks * (cell + 2), 420), y + 8, "".join(body), caption_event)


def _scenario(rng, block_size=4, num_blocks=20, prompt=10):
    cache = PagedKVCache(num_blocks, block_size, HKV, D)
    history = {}

    def write(seq, n):
        k = rng.standard_normal((n, HKV, D)).astype(np.float32)
        v = rng.standard_normal((n, HKV, D)).astype(np.float32)
        cache.append(seq, k, v)
        hk, hv = history[seq]
        history[seq] = (np.concatenate([hk, k]), np.concatenate([hv, v]))

    frames = []
    cache.add_sequence("A")
    history["A"] = (np.zeros((0, HKV, D), np.float32), np.zeros((0, HKV, D), np.float32))
    write("A", prompt)
    frames.append((cache.snapshot(), f"A writes a {prompt}-token prompt: {-(-prompt // block_size)} blocks, the "
                                     "last one partly filled"))
    for child in ("B", "C"):
        cache.fork("A", child)
        history[child] = history["A"]
    frames.append((cache.snapshot(), "B and C fork from A: they share all 3 blocks (reference count 3), "
                                     "nothing is copied"))
    n0 = len(cache.events)
    write("B", 1)
    cow = [e for e in cache.events[n0:] if e.kind == "copy-on-write"]
    frames.append((cache.snapshot(), f"B writes a token into the shared last block: copy-on-write "
                                     f"{cow[0].source} -> {cow[0].block}" if cow else "B writes a token"))
    write("C", 3)
    frames.append((cache.snapshot(), "C diverges too: it copies the partial block, then needs a fresh one"))
    write("A", 4)
    frames.append((cache.snapshot(), "A's last block is now its own (refcount 1): it writes in place, no copy"))
    write("B", 5)
    frames.append((cache.snapshot(), "B keeps decoding; the full prompt blocks stay shared by all three"))
    return cache, history, frames


def verify_decode(cache, history, rng):
    """attention_decode through the block table vs contiguous caches holding each sequence's own tokens."""
    seqs = list(cache.tables)
    table_ = cache.block_table(seqs)
    lens = cache.seqlens(seqs)
    q = rng.standard_normal((len(seqs), HQ, D)).astype(np.float32)
    paged = attention_decode(q, cache.k_pages, cache.v_pages, lens, block_table=table_)
    S = int(lens.max())
    kc = np.zeros((len(seqs), S, HKV, D), np.float32)
    vc = np.zeros_like(kc)
    for r, s in enumerate(seqs):
        kc[r, :lens[r]], vc[r, :lens[r]] = history[s]
    contiguous = attention_decode(q, kc, vc, lens)
    return float(np.max(np.abs(paged - contiguous))), table_, lens


def fragmentation(rng, num_seqs=16, prompt=200, max_len=2048, block_size=16):
    """Many sequences sharing a system prompt: bytes held by contiguous caches reserved at max_len vs pages."""
    lengths = rng.integers(20, 900, num_seqs)
    cache = PagedKVCache(4096, block_size, 1, 1)
    cache.add_sequence(0)
    cache.append(0, np.zeros((prompt, 1, 1)), np.zeros((prompt, 1, 1)))
    for s in range(1, num_seqs):
        cache.fork(0, s)
    for s in range(num_seqs):
        n = int(lengths[s])
        cache.append(s, np.zeros((n, 1, 1)), np.zeros((n, 1, 1)))
    st = cache.stats()
    per_token = memory.softmax_kv(8, 128, dtype="bfloat16").bytes_per_token
    return {"num_seqs": num_seqs, "prompt": prompt, "max_len": max_len, "block_size": block_size,
            "bytes_per_token": per_token,
            "contiguous_reserved": num_seqs * max_len * per_token,
            "contiguous_exact": st["logical_tokens"] * per_token,
            "paged": st["physical_slots"] * per_token, "logical_tokens": st["logical_tokens"],
            "physical_slots": st["physical_slots"], "blocks": st["blocks"]}


def _bars(fr):
    items = [("contiguous, reserved at max_len", fr["contiguous_reserved"], "c4"),
             ("contiguous, exact length (no sharing)", fr["contiguous_exact"], "c2"),
             ("paged, shared prompt", fr["paged"], "c1")]
    top = max(v for _, v, _ in items)
    body = []
    for i, (name, v, cls) in enumerate(items):
        y = 8 + i * 30
        w = 420 * v / top
        body.append(f'<rect x="230" y="{y}" width="{w:.1f}" height="20" class="{cls}"/>')
        body.append(text(226, y + 14, name, "", "end"))
        body.append(text(234 + w, y + 14, human_bytes(v), "small"))
    return svg(720, 100, "".join(body), "KV bytes: contiguous vs paged")


def build(ctx):
    rng = np.random.default_rng(21)
    cache, history, snaps = _scenario(rng)
    diff, table_, lens = verify_decode(cache, history, rng)
    nb, bs = cache.allocator.num_blocks, cache.block_size
    frames = [_frame(s, nb, bs, c) for s, c in snaps]
    events = [e for e in cache.events if e.kind == "copy-on-write"]
    fr = fragmentation(rng)
    facts = {"paged_vs_contiguous_max_abs_diff": diff, "block_table": table_.tolist(), "seqlens": lens.tolist(),
             "copy_on_write": [(e.seq, e.source, e.block) for e in events], "fragmentation": fr,
             "ref_counts": cache.allocator.ref_counts.tolist()}
    rows = [[esc(s), str(int(lens[r])), " ".join(str(b) for b in table_[r])] for r, s in enumerate(cache.tables)]
    body = [f"<p>A paged cache stores keys and values in fixed blocks ({bs} tokens here) drawn from one pool; "
            "each sequence has a block table mapping its logical blocks to physical ones. Sequences forked from "
            "a shared prompt point at the same physical blocks and bump their reference count; the first write "
            "into a shared block that still has room copies it (copy-on-write). The allocator is "
            "<code>attnzoo.explain.paging.PagedKVCache</code>; after the last step its tables went straight into "
            "<code>attnzoo.attention_decode(q, k_pages, v_pages, cache_seqlens, block_table=...)</code>.</p>",
            animated_figure(frames, "shared prompt blocks are stored once; only the block where a sequence "
                                    "diverges is copied.", [c for _, c in snaps], interval_ms=1400),
            figure(table(["sequence", "cache_seqlens", "block_table row (what attention_decode read)"], rows) +
                   f'<p class="check">paged decode vs contiguous caches of the same tokens: max |diff| = '
                   f'<span data-paged-diff="{diff:.3e}">{diff:.2e}</span> over {len(lens)} sequences, '
                   f"{HQ} query heads, {HKV} kv heads</p>",
                   "the block table is the only indirection: same tokens, same result, scattered pages."),
            "<h3>Fragmentation: pages vs a contiguous cache</h3>"
            f"<p>{fr['num_seqs']} sequences share a {fr['prompt']}-token system prompt and then write "
            f"20-900 tokens each (an 8-kv-head, D=128 bf16 layer: {fr['bytes_per_token']:,} bytes/token). A "
            f"contiguous cache must reserve max_len = {fr['max_len']} tokens per sequence up front; pages of "
            f"{fr['block_size']} tokens hold {fr['logical_tokens']:,} logical tokens in {fr['physical_slots']:,} "
            f"slots ({fr['blocks']} blocks), because the prompt is stored once.</p>",
            figure(_bars(fr), "reservation for the worst case, not the tokens, dominates a contiguous cache.")]
    return Section(ID, TITLE, "".join(body), facts, figures=3)
