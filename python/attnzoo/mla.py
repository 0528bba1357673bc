"""Multi-head latent attention (DeepSeek-V2/V3): naive and absorbed forms."""


def mla_prefill(*args, **kwargs):
    raise NotImplementedError("mla_prefill: not implemented yet")


def mla_decode(*args, **kwargs):
    raise NotImplementedError("mla_decode: not implemented yet")
