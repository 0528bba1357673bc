"""A pure-torch re-statement of flash-linear-attention's RWKV7ForCausalLM (fla 0.6.0), the reference the
attnzoo RWKV-7 model is tested against.

fla's model classes import triton (absent here), so they cannot run. This module keeps their module tree and
parameter names/shapes exactly (so `state_dict()` is what fla's model would save) and restates the forward pass
from fla/models/rwkv7/modeling_rwkv7.py and fla/layers/rwkv7.py, with each fused op replaced by fla's own torch
form: token_shift_ref, torch_addcmul_rwkv7, k_update_ref, gate_output_correction_ref, layer_norm_ref /
group_norm_ref, the fused l2norm (x * rsqrt(sum x^2 + 1e-6)). The time-mix core is fla-core's naive DPLR recurrence
(fla/ops/generalized_delta_rule/dplr/naive.py), loaded from its file. RWKV7Config is fla's own class, loaded from
its file (it needs neither triton nor the rest of fla).
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

FLA_DIR = os.path.join(os.path.dirname(torch.__file__), "..", "fla")
FLA_DIR = os.path.normpath(FLA_DIR)
# fla's RWKV7Attention: w = -0.6065306597126334 * sigmoid(w_lora(xw)), i.e. log decay in [-exp(-0.5), 0].
W_SCALE = -0.6065306597126334


def _load_file(name: str, relpath: str, extra: dict | None = None):
    """Imports one fla file without running fla/__init__ (which imports triton). `extra` modules are visible in
    sys.modules only while the file executes."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(FLA_DIR, relpath))
    mod = importlib.util.module_from_spec(spec)
    added = dict(extra or {})
    added[name] = mod
    saved = {k: sys.modules.get(k) for k in added}
    sys.modules.update(added)
    try:
        spec.loader.exec_module(mod)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return mod


_naive = _load_file("_attnzoo_fla_dplr_naive", "ops/generalized_delta_rule/dplr/naive.py")
_config_utils = _load_file("_attnzoo_fla_configuration_utils", "models/configuration_utils.py")
_config_mod = _load_file(
    "_attnzoo_fla_configuration_rwkv7", "models/rwkv7/configuration_rwkv7.py",
    extra={"fla.models.configuration_utils": _config_utils},
)
RWKV7Config = _config_mod.RWKV7Config
dplr_recurrence = _naive.dplr_recurrence


class LoRA(nn.Module):
    """fla.layers.rwkv6.LoRA: Linear(in, r, bias=False) -> activation -> Linear(r, out, bias)."""

    def __init__(self, input_dim, output_dim, low_rank_dim, bias=True, activation="tanh"):
        super().__init__()
        act = {None: nn.Identity(), "sigmoid": nn.Sigmoid(), "tanh": nn.Tanh()}[activation]
        self.lora = nn.Sequential(
            nn.Linear(input_dim, low_rank_dim, bias=False),
            act,
            nn.Linear(low_rank_dim, output_dim, bias=bias),
        )

    def forward(self, x):
        return self.lora(x)


def token_shift(x: torch.Tensor, cache: torch.Tensor | None):
    """fla token_shift for one sequence x [T, D]: delta = previous token - x, the previous token of the first
    being `cache` (the last token of the previous call) or zero. Returns (delta, new cache)."""
    prev = torch.empty_like(x)
    prev[1:] = x[:-1]
    prev[0] = 0 if cache is None else cache
    return prev - x, x[-1].clone()


def l2_norm(x: torch.Tensor, fused: bool) -> torch.Tensor:
    if fused:  # fla.modules.l2norm: x / sqrt(sum x^2 + eps), eps = 1e-6
        return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)
    return F.normalize(x, dim=-1, p=2.0)


class RWKV7Attention(nn.Module):

    def __init__(self, config: RWKV7Config, layer_idx: int):
        super().__init__()
        C = config.hidden_size
        self.layer_idx = layer_idx
        self.hidden_size = C
        self.key_dim = C
        self.value_dim = config.value_dim[layer_idx]
        self.head_dim = config.head_dim
        self.num_heads = C // self.head_dim
        self.head_v_dim = self.value_dim // self.num_heads
        self.fuse_norm = config.fuse_norm
        for n in ("x_r", "x_w", "x_k", "x_v", "x_a", "x_g"):
            setattr(self, n, nn.Parameter(torch.zeros(1, 1, C)))
        self.k_k = nn.Parameter(torch.zeros(self.key_dim))
        self.k_a = nn.Parameter(torch.zeros(self.key_dim))
        self.r_k = nn.Parameter(torch.zeros(self.num_heads, self.head_dim))
        self.r_proj = nn.Linear(C, self.key_dim, bias=False)
        self.k_proj = nn.Linear(C, self.key_dim, bias=False)
        self.v_proj = nn.Linear(C, self.value_dim, bias=False)
        self.o_proj = nn.Linear(self.value_dim, C, bias=False)
        self.w_lora = LoRA(C, self.key_dim, config.decay_low_rank_dim, activation="tanh")
        if layer_idx != 0:
            self.v_lora = LoRA(C, self.value_dim, config.v_low_rank_dim, activation=None)
        self.a_lora = LoRA(C, self.key_dim, config.a_low_rank_dim, activation=None)
        self.g_lora = LoRA(C, self.value_dim, config.gate_low_rank_dim, activation="sigmoid", bias=False)
        # fla's GroupNorm(bias=True) and nn.GroupNorm(affine) hold the same weight/bias and compute the same thing.
        self.g_norm = nn.GroupNorm(self.num_heads, self.value_dim, eps=self.head_dim * config.norm_eps, affine=True)

    def forward(self, x, v_first, state):
        """x [T, C] (one sequence); state: dict with conv_state [C] and recurrent_state [H, K, V] or None."""
        T = x.shape[0]
        H, K, V = self.num_heads, self.head_dim, self.head_v_dim
        delta, conv_state = token_shift(x, None if state is None else state["conv_state"])
        xr, xw, xk, xv, xa, xg = (torch.addcmul(x, delta, p.view(-1))
                                  for p in (self.x_r, self.x_w, self.x_k, self.x_v, self.x_a, self.x_g))
        r = self.r_proj(xr)
        w = W_SCALE * self.w_lora(xw).sigmoid()
        k = self.k_proj(xk)
        v = self.v_proj(xv)
        if self.layer_idx == 0:
            v_first = v
        else:
            v = torch.lerp(v, v_first, self.v_lora(xv).sigmoid())
        a = self.a_lora(xa).sigmoid()
        g = self.g_lora(xg)
        kk = l2_norm((k * self.k_k).view(T, H, K), self.fuse_norm)
        k = k.addcmul(k * (a - 1), self.k_a)  # fla k_update_ref
        r, w, k, a = (t.view(T, H, K) for t in (r, w, k, a))
        v = v.view(T, H, V)
        # dplr_recurrence takes [B, H, L, D] and scales q by K^-0.5; RWKV-7 uses scale 1.
        to_bhld = lambda t: t.transpose(0, 1).unsqueeze(0)  # noqa: E731
        h0 = None if state is None else state["recurrent_state"].unsqueeze(0)
        o, S = dplr_recurrence(to_bhld(r * K ** 0.5), to_bhld(k), to_bhld(v), to_bhld(-kk), to_bhld(kk * a),
                               to_bhld(w), initial_state=h0, output_final_state=True)
        o = o[0].transpose(0, 1).reshape(T, H * V)
        o = self.g_norm(o)
        # fla gate_output_correction_ref
        o = (o + ((r * k * self.r_k).sum(-1, keepdim=True) * v).view(T, H * V)) * g
        return self.o_proj(o), v_first, {"conv_state": conv_state, "recurrent_state": S[0]}


class RWKV7FeedForward(nn.Module):

    def __init__(self, config: RWKV7Config, layer_idx: int):
        super().__init__()
        C = config.hidden_size
        inter = config.intermediate_size
        if inter is None:
            ratio = 4 if config.hidden_ratio is None else config.hidden_ratio
            inter = int(C * ratio)
            inter = 32 * ((inter + 32 - 1) // 32)
        self.x_k = nn.Parameter(torch.zeros(C))
        self.key = nn.Linear(C, inter, bias=False)
        self.value = nn.Linear(inter, C, bias=False)

    def forward(self, x, cache):
        delta, new_cache = token_shift(x, cache)
        return self.value(F.relu(self.key(x.addcmul(delta, self.x_k))) ** 2), new_cache


class RWKV7Block(nn.Module):

    def __init__(self, config: RWKV7Config, layer_idx: int):
        super().__init__()
        ln = lambda: nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)  # noqa: E731
        if config.norm_first and layer_idx == 0:
            self.pre_norm = ln()
        self.attn_norm = ln()
        self.attn = RWKV7Attention(config, layer_idx)
        self.ffn_norm = ln()
        self.ffn = RWKV7FeedForward(config, layer_idx)

    def forward(self, x, v_first, state):
        residual = self.pre_norm(x) if hasattr(self, "pre_norm") else x
        h, v_first, attn_state = self.attn(self.attn_norm(residual), v_first, state)
        residual = residual + h  # fla's fused ffn_norm(h, residual, prenorm=True)
        h, ffn_state = self.ffn(self.ffn_norm(residual), None if state is None else state["ffn_state"])
        attn_state["ffn_state"] = ffn_state
        return residual + h, v_first, attn_state


class RWKV7Model(nn.Module):

    def __init__(self, config: RWKV7Config):
        super().__init__()
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)
        self.layers = nn.ModuleList([RWKV7Block(config, i) for i in range(config.num_hidden_layers)])
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)


class RWKV7ForCausalLM(nn.Module):

    def __init__(self, config: RWKV7Config):
        super().__init__()
        if config.attn is not None:
            raise ValueError("hybrid RWKV-7 + softmax attention configs are not restated here")
        self.config = config
        self.model = RWKV7Model(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embeddings.weight

    @torch.no_grad()
    def forward(self, ids, state=None):
        """ids: 1-D token ids of one sequence. Returns (logits [T, vocab], state) where state is one dict per
        layer (conv_state [C], recurrent_state [H, K, V] f32, ffn_state [C]) to continue from."""
        x = self.model.embeddings(torch.as_tensor(ids, dtype=torch.long))
        v_first = torch.zeros_like(x)
        new_state = []
        for i, layer in enumerate(self.model.layers):
            x, v_first, s = layer(x, v_first, None if state is None else state[i])
            new_state.append(s)
        return self.lm_head(self.model.norm(x)), new_state

    @torch.no_grad()
    def greedy(self, ids, max_new_tokens):
        logits, state = self.forward(ids)
        out = []
        for _ in range(max_new_tokens):
            nxt = int(logits[-1].argmax())
            out.append(nxt)
            logits, state = self.forward([nxt], state)
        return out


@torch.no_grad()
def randomize(model: RWKV7ForCausalLM, seed: int) -> None:
    """Moderate random values for every weight (norms and biases included), so every term moves the logits."""
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        shape = p.shape
        if leaf in ("x_r", "x_w", "x_k", "x_v", "x_a", "x_g"):
            p.copy_(torch.rand(shape, generator=g))
        elif leaf in ("k_k", "k_a"):
            p.copy_(0.8 + 0.4 * torch.rand(shape, generator=g))
        elif leaf == "r_k":
            p.copy_(0.5 * torch.randn(shape, generator=g))
        elif "norm" in name and leaf == "weight":
            p.copy_(1.0 + 0.3 * torch.randn(shape, generator=g))
        elif leaf == "bias":
            p.copy_(0.3 * torch.randn(shape, generator=g))
        elif "embeddings" in name:  # also the tied lm_head: keep logits O(1)
            p.copy_(2.0 * torch.randn(shape, generator=g) / shape[-1] ** 0.5)
        else:  # Linear weights [out, in]
            p.copy_(torch.randn(shape, generator=g) / shape[-1] ** 0.5)


def make_config(**kw) -> RWKV7Config:
    cfg = RWKV7Config(**kw)
    cfg.architectures = ["RWKV7ForCausalLM"]
    return cfg


def save_checkpoint(model: RWKV7ForCausalLM, path: str) -> None:
    """safetensors weights + config.json as fla's RWKV7Config.to_json_file writes it."""
    from safetensors.torch import save_file

    os.makedirs(path, exist_ok=True)
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        sd.pop("lm_head.weight")
    save_file(sd, os.path.join(path, "model.safetensors"))
    model.config.to_json_file(os.path.join(path, "config.json"))
    with open(os.path.join(path, "config.json")) as f:
        assert json.load(f)["model_type"] == "rwkv7"
