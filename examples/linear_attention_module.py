"""A Gated DeltaNet layer (Qwen3-Next's linear attention) as a torch module whose core runs on attnzoo:
projections in torch, the chunked kernel for the prompt and the recurrent kernel for each new token, carrying
the [heads, K, V] state between calls. Inference only (attnzoo has no autograd).

    python examples/linear_attention_module.py
"""
import torch
import torch.nn.functional as F

import attnzoo


class GatedDeltaNet(torch.nn.Module):
    def __init__(self, hidden, heads, head_dim):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.qkv = torch.nn.Linear(hidden, 3 * heads * head_dim, bias=False)
        self.gates = torch.nn.Linear(hidden, 2 * heads, bias=False)  # decay and write strength per head
        self.out = torch.nn.Linear(heads * head_dim, hidden, bias=False)

    @torch.no_grad()
    def forward(self, x, state=None):
        """x [B, T, hidden]; state [B, heads, K, V] or None. Returns (y, new state)."""
        B, T, _ = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, self.head_dim).unbind(2)
        a, b = self.gates(x).view(B, T, 2, self.heads).unbind(2)
        g = F.logsigmoid(a)  # log decay <= 0
        beta = torch.sigmoid(b)
        fn = attnzoo.linear.chunk_gated_delta_rule if T > 1 else attnzoo.linear.recurrent_gated_delta_rule
        o, state = fn(q.contiguous(), k.contiguous(), v.contiguous(), g.contiguous(), beta.contiguous(),
                      initial_state=state, output_final_state=True, use_qk_l2norm_in_kernel=True)
        return self.out(o.reshape(B, T, -1)), state


torch.manual_seed(0)
layer = GatedDeltaNet(hidden=128, heads=4, head_dim=32).eval()
x = torch.randn(2, 48, 128)
y_all, _ = layer(x)  # the whole sequence at once (chunked)
y_prompt, state = layer(x[:, :40])  # a prompt, then token by token (recurrent) from the carried state
steps = [y_prompt]
for t in range(40, 48):
    y_t, state = layer(x[:, t:t + 1], state)
    steps.append(y_t)
err = (torch.cat(steps, 1) - y_all).abs().max().item()
print(f"output {tuple(y_all.shape)}, finite: {bool(torch.isfinite(y_all).all())}; prompt + steps vs one pass: {err:.1e}")
assert err < 1e-4
