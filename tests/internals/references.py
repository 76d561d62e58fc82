"""Independent references for the engine tests, computed from the weights with plain torch.

Nothing here uses the engine: inputs come from the HF model's own
``output_hidden_states`` / ``output_attentions`` or from hooks the test installs.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from transformers.activations import ACT2FN


def hidden_states(model, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Residual stream entering each block (index l) from the HF model itself."""
    with torch.no_grad():
        return model(input_ids=ids, output_hidden_states=True).hidden_states


def eager_copy(model):
    m = copy.deepcopy(model)
    m.set_attn_implementation("eager")
    return m


def eager_attentions(model, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        return eager_copy(model)(input_ids=ids, output_attentions=True).attentions


def blocks(model, family: str):
    if family == "gpt_neox":
        return model.gpt_neox.layers
    return model.transformer.h if family == "gpt2" else model.model.layers


def attn_input(model, family: str, layer: int, x: torch.Tensor) -> torch.Tensor:
    """What the attention block of ``layer`` reads: norm(x), or x for post-norm olmo2."""
    block = blocks(model, family)[layer]
    if family == "olmo2":
        return x
    if family == "gpt2":
        return block.ln_1(x)
    return block.input_layernorm(x)  # gpt_neox too


def qkv_raw(model, family: str, layer: int, xn: torch.Tensor, H: int, Hkv: int, D: int):
    """Raw q, k, v projections [B, S, heads, D] by matrix products on the weights."""
    block = blocks(model, family)[layer]
    if family == "gpt2":
        a = block.attn.c_attn
        out = xn @ a.weight + a.bias  # Conv1D: weight is [in, out]
        q, k, v = out.split([H * D, Hkv * D, Hkv * D], dim=-1)
    elif family == "phi3":
        out = xn @ block.self_attn.qkv_proj.weight.T
        q, k, v = out.split([H * D, Hkv * D, Hkv * D], dim=-1)
    elif family == "gpt_neox":  # interleaved per head: [h0: q k v | h1: q k v | ...]
        a = block.attention.query_key_value
        out = (xn @ a.weight.T + a.bias).unflatten(-1, (H, 3 * D))
        shape = xn.shape[:-1]
        return out[..., :D], out[..., D:2 * D], out[..., 2 * D:]
    else:
        at = block.self_attn

        def lin(m):
            return F.linear(xn, m.weight, m.bias)

        q, k, v = lin(at.q_proj), lin(at.k_proj), lin(at.v_proj)
    shape = xn.shape[:-1]
    return q.reshape(*shape, H, D), k.reshape(*shape, Hkv, D), v.reshape(*shape, Hkv, D)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, gemma: bool) -> torch.Tensor:
    """RMSNorm written out: x / rms(x) * w  (Gemma: * (1 + w))."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * ((1.0 + weight.float()) if gemma else weight.float())).to(x.dtype)


def qk_normed(model, family: str, layer: int, q: torch.Tensor, k: torch.Tensor):
    """Apply the family's q/k norm by hand (identity for families without one)."""
    at = blocks(model, family)[layer].self_attn if family not in ("gpt2", "gpt_neox") else None
    if family in ("qwen3", "gemma3"):
        gemma = family == "gemma3"
        return (rms_norm(q, at.q_norm.weight, at.q_norm.variance_epsilon if hasattr(at.q_norm, "variance_epsilon") else at.q_norm.eps, gemma),
                rms_norm(k, at.k_norm.weight, at.k_norm.variance_epsilon if hasattr(at.k_norm, "variance_epsilon") else at.k_norm.eps, gemma))
    if family == "olmo2":
        eps = at.q_norm.variance_epsilon
        qf = rms_norm(q.flatten(-2), at.q_norm.weight, eps, False).unflatten(-1, q.shape[-2:])
        kf = rms_norm(k.flatten(-2), at.k_norm.weight, eps, False).unflatten(-1, k.shape[-2:])
        return qf, kf
    return q, k


def mlp_act_reference(model, family: str, layer: int, mlp_in: torch.Tensor) -> torch.Tensor:
    """Input of the down projection from the MLP's input, by matrix products on the weights."""
    block = blocks(model, family)[layer]
    cfg = model.config
    if family == "gpt2":
        act = ACT2FN[cfg.activation_function]
        return act(mlp_in @ block.mlp.c_fc.weight + block.mlp.c_fc.bias)
    if family == "gpt_neox":
        return ACT2FN[cfg.hidden_act](F.linear(mlp_in, block.mlp.dense_h_to_4h.weight, block.mlp.dense_h_to_4h.bias))
    act_name = getattr(cfg, "hidden_activation", None) or cfg.hidden_act
    act = ACT2FN[act_name]
    mlp = block.mlp
    if family == "phi3":
        gate, up = (mlp_in @ mlp.gate_up_proj.weight.T).chunk(2, dim=-1)
    else:
        gate, up = mlp_in @ mlp.gate_proj.weight.T, mlp_in @ mlp.up_proj.weight.T
    return act(gate) * up


def mlp_inputs(model, family: str, ids: torch.Tensor) -> list[torch.Tensor]:
    """The input of every block's MLP, recorded with plain forward pre-hooks."""
    got: dict[int, torch.Tensor] = {}
    handles = []
    for l, block in enumerate(blocks(model, family)):
        handles.append(block.mlp.register_forward_pre_hook(lambda m, a, l=l: got.__setitem__(l, a[0].detach())))
    with torch.no_grad():
        model(input_ids=ids)
    for h in handles:
        h.remove()
    return [got[l] for l in range(len(got))]


def mlp_out_reference(model, family: str, layer: int, mlp_in: torch.Tensor) -> torch.Tensor:
    """What the MLP adds to the residual, from its input: the down projection of the activations,
    then the post-MLP norm written out where the family has one (gemma2/3: RMSNorm * (1 + w); olmo2)."""
    block = blocks(model, family)[layer]
    act = mlp_act_reference(model, family, layer, mlp_in)
    if family == "gpt2":
        out = act @ block.mlp.c_proj.weight + block.mlp.c_proj.bias
    elif family == "gpt_neox":
        out = F.linear(act, block.mlp.dense_4h_to_h.weight, block.mlp.dense_4h_to_h.bias)
    else:
        out = F.linear(act, block.mlp.down_proj.weight)
    if family in ("gemma2", "gemma3", "olmo2"):
        norm = block.post_feedforward_layernorm
        eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", 1e-6))
        out = rms_norm(out, norm.weight, eps, family != "olmo2")
    return out
