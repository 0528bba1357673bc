"""Decode attention against contiguous and paged KV caches."""


def attention_decode(*args, **kwargs):
    raise NotImplementedError("attention_decode: not implemented yet")
