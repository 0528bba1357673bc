"""A small paged KV cache: a block allocator with reference counts, prefix sharing and copy-on-write.

The layout is flash_attn_with_kvcache's, which attnzoo.attention_decode reads directly: k_pages and v_pages
[num_blocks, block_size, Hkv, D], and per sequence a row of the int32 block table naming its physical
blocks in order. Forking a sequence shares all its blocks (reference count + 1); the first write into a
shared, partially filled block copies it first (copy-on-write), so sequences that share a prompt pay for it
once. Meant to be read and to drive the explainer; a serving scheduler would add eviction and swapping.
"""
from dataclasses import dataclass
from typing import Dict, List

import numpy as np


class OutOfBlocks(RuntimeError):
    pass


class BlockAllocator:
    """Physical blocks 0 .. num_blocks-1, a free list and a reference count per block."""

    def __init__(self, num_blocks, block_size):
        if num_blocks < 1:
            raise ValueError(f"num_blocks: must be >= 1, got {num_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size: must be >= 1, got {block_size}")
        self.num_blocks, self.block_size = int(num_blocks), int(block_size)
        self.ref_counts = np.zeros(self.num_blocks, np.int32)
        self._free = list(range(self.num_blocks - 1, -1, -1))  # pop() hands out the lowest first

    def allocate(self):
        if not self._free:
            raise OutOfBlocks(f"all {self.num_blocks} blocks are in use")
        b = self._free.pop()
        self.ref_counts[b] = 1
        return b

    def share(self, block):
        if self.ref_counts[block] < 1:
            raise ValueError(f"block: {block} is not allocated")
        self.ref_counts[block] += 1

    def release(self, block):
        if self.ref_counts[block] < 1:
            raise ValueError(f"block: {block} is not allocated")
        self.ref_counts[block] -= 1
        if self.ref_counts[block] == 0:
            self._free.append(block)

    @property
    def used_blocks(self):
        return int((self.ref_counts > 0).sum())


@dataclass
class Event:
    kind: str        # "allocate", "share", "copy-on-write", "release"
    seq: str
    block: int
    source: int = -1  # the block copied from (copy-on-write)


class PagedKVCache:
    """K/V pages plus one block table per sequence (sequence ids are any hashable, e.g. strings)."""

    def __init__(self, num_blocks, block_size, num_kv_heads, head_dim, dtype=np.float32):
        self.allocator = BlockAllocator(num_blocks, block_size)
        self.block_size = int(block_size)
        shape = (int(num_blocks), self.block_size, int(num_kv_heads), int(head_dim))
        self.k_pages = np.zeros(shape, dtype)
        self.v_pages = np.zeros(shape, dtype)
        self.tables: Dict[object, List[int]] = {}
        self.lengths: Dict[object, int] = {}
        self.events: List[Event] = []

    def add_sequence(self, seq):
        if seq in self.tables:
            raise ValueError(f"seq: {seq!r} already exists")
        self.tables[seq], self.lengths[seq] = [], 0

    def fork(self, parent, child):
        """child starts as a copy of parent that shares every block (no data copied)."""
        if parent not in self.tables:
            raise ValueError(f"parent: unknown sequence {parent!r}")
        self.add_sequence(child)
        for b in self.tables[parent]:
            self.allocator.share(b)
            self.events.append(Event("share", child, b))
        self.tables[child] = list(self.tables[parent])
        self.lengths[child] = self.lengths[parent]

    def append(self, seq, k, v):
        """Writes tokens k, v [n, Hkv, D] at the end of seq, allocating or copying blocks as needed."""
        if seq not in self.tables:
            raise ValueError(f"seq: unknown sequence {seq!r}")
        k, v = np.asarray(k), np.asarray(v)
        if k.shape != v.shape or k.shape[1:] != self.k_pages.shape[2:]:
            raise ValueError(f"k, v: expected [n, {self.k_pages.shape[2]}, {self.k_pages.shape[3]}], got "
                             f"{k.shape} and {v.shape}")
        table = self.tables[seq]
        for i in range(k.shape[0]):
            pos = self.lengths[seq]
            slot = pos % self.block_size
            if slot == 0:
                table.append(self.allocator.allocate())
                self.events.append(Event("allocate", seq, table[-1]))
            elif self.allocator.ref_counts[table[-1]] > 1:
                old = table[-1]
                new = self.allocator.allocate()
                self.k_pages[new, :slot] = self.k_pages[old, :slot]
                self.v_pages[new, :slot] = self.v_pages[old, :slot]
                self.allocator.release(old)
                table[-1] = new
                self.events.append(Event("copy-on-write", seq, new, old))
            self.k_pages[table[-1], slot] = k[i]
            self.v_pages[table[-1], slot] = v[i]
            self.lengths[seq] = pos + 1

    def free(self, seq):
        for b in self.tables.pop(seq):
            self.allocator.release(b)
            self.events.append(Event("release", seq, b))
        del self.lengths[seq]

    def block_table(self, seqs):
        """int32 [len(seqs), max blocks] for attention_decode; unused entries are -1 (never read)."""
        width = max(len(self.tables[s]) for s in seqs)
        out = np.full((len(seqs), max(width, 1)), -1, np.int32)
        for r, s in enumerate(seqs):
            out[r, :len(self.tables[s])] = self.tables[s]
        return out

    def seqlens(self, seqs):
        return np.array([self.lengths[s] for s in seqs], np.int32)

    def gather(self, seq):
        """The sequence's keys and values as contiguous [length, Hkv, D] arrays."""
        n, t = self.lengths[seq], self.tables[seq]
        k = self.k_pages[t].reshape(-1, *self.k_pages.shape[2:])[:n]
        v = self.v_pages[t].reshape(-1, *self.v_pages.shape[2:])[:n]
        return k, v

    def stats(self):
        """Token slots: logical (what sequences hold), physical (allocated blocks x block size), and the
        unused tail slots of last blocks."""
        logical = sum(self.lengths.values())
        physical = self.allocator.used_blocks * self.block_size
        tails = sum((-n) % self.block_size for n in self.lengths.values())
        return {"logical_tokens": logical, "physical_slots": physical, "blocks": self.allocator.used_blocks,
                "unused_tail_slots": tails}

    def snapshot(self):
        return {"tables": {s: list(t) for s, t in self.tables.items()}, "lengths": dict(self.lengths),
                "ref_counts": self.allocator.ref_counts.copy(), "events": len(self.events)}
