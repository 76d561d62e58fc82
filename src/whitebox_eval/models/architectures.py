"""Declarative descriptions of where things live in each supported model family.

The engine never hard-codes a module name: it asks the :class:`Architecture` of the
loaded model. Adding a family means adding one :class:`Family` entry to ``FAMILIES``.

Paths are dotted attribute paths. ``layers`` is relative to the causal-LM object;
``attention`` and ``mlp_*`` are relative to one decoder block; the projections and
norms are relative to the attention module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from whitebox_eval.errors import WhiteboxError


@dataclass(frozen=True)
class Family:
    """Where one model family keeps its parts (see the module docstring for path roots)."""

    name: str
    model_types: tuple[str, ...]
    layers: str = "model.layers"
    attention: str = "self_attn"
    q_proj: str | None = "q_proj"
    k_proj: str | None = "k_proj"
    v_proj: str | None = "v_proj"
    qkv_proj: str | None = None
    """Fused q/k/v projection (phi3, gpt2, gpt_neox): its output is split [q | k | v], or per head
    [h0: q k v | h1: q k v | ...] where ``qkv_interleaved`` (gpt_neox)."""
    qkv_interleaved: bool = False
    o_proj: str = "o_proj"
    q_norm: str | None = None
    k_norm: str | None = None
    qk_norm_layout: Literal["bshd", "bhsd", "bsf"] = "bshd"
    """Shape of the q/k norm output: [batch, seq, heads, head_dim] (qwen3),
    [batch, heads, seq, head_dim] (gemma3 normalises after the transpose), or
    [batch, seq, heads * head_dim] (olmo2 normalises the whole projection)."""
    mlp_down: str = "mlp.down_proj"
    mlp_act_fn: str = "mlp.act_fn"
    """Module whose output is act(gate) (for gated MLPs the down projection's input is
    act(gate) * up; MUI's reference code used act(gate) only)."""
    mlp_gated: bool = True
    final_norm: str = "model.norm"
    unembed: str = "lm_head"
    embed: str = "model.embed_tokens"
    positional: Literal["rope", "learned"] = "rope"
    conv1d: bool = False
    """GPT-2 style Conv1D projections store weights as [in, out]."""
    mlp_out: str = "mlp"
    """Module (relative to the block) whose output is what the MLP adds to the residual
    (TransformerLens' ``hook_mlp_out``): after the post-MLP norm where the family has one."""
    attn_out: str = "self_attn"
    """Module whose output is what attention adds to the residual (``hook_attn_out``)."""
    resid_mid: str | None = "post_attention_layernorm"
    """Module whose input is the residual between attention and MLP (``hook_resid_mid``)."""


#: gemma2/3 norm each branch's output before it joins the residual (post_attention_layernorm is the
#: attention's post-norm there, pre_feedforward_layernorm the MLP's input norm)
_GEMMA_SITES = dict(mlp_out="post_feedforward_layernorm", attn_out="post_attention_layernorm",
                    resid_mid="pre_feedforward_layernorm")

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family("llama", ("llama",)),
        Family("mistral", ("mistral",)),
        Family("qwen2", ("qwen2",)),
        Family("qwen3", ("qwen3",), q_norm="q_norm", k_norm="k_norm", qk_norm_layout="bshd"),
        Family("gemma2", ("gemma2",), **_GEMMA_SITES),
        Family("gemma3", ("gemma3_text",), q_norm="q_norm", k_norm="k_norm", qk_norm_layout="bhsd", **_GEMMA_SITES),
        Family("olmo2", ("olmo2",), q_norm="q_norm", k_norm="k_norm", qk_norm_layout="bsf",
               mlp_out="post_feedforward_layernorm", attn_out="post_attention_layernorm", resid_mid="mlp"),
        Family(
            "phi3",
            ("phi3",),
            q_proj=None,
            k_proj=None,
            v_proj=None,
            qkv_proj="qkv_proj",
            mlp_act_fn="mlp.activation_fn",
        ),
        Family(
            "gpt2",
            ("gpt2",),
            layers="transformer.h",
            attention="attn",
            q_proj=None,
            k_proj=None,
            v_proj=None,
            qkv_proj="c_attn",
            o_proj="c_proj",
            mlp_down="mlp.c_proj",
            mlp_act_fn="mlp.act",
            mlp_gated=False,
            final_norm="transformer.ln_f",
            embed="transformer.wte",
            positional="learned",
            conv1d=True,
            attn_out="attn",
            resid_mid="ln_2",
        ),
        Family(
            "gpt_neox",
            ("gpt_neox",),
            layers="gpt_neox.layers",
            attention="attention",
            q_proj=None,
            k_proj=None,
            v_proj=None,
            qkv_proj="query_key_value",
            qkv_interleaved=True,
            o_proj="dense",
            mlp_down="mlp.dense_4h_to_h",
            mlp_act_fn="mlp.act",
            mlp_gated=False,
            final_norm="gpt_neox.final_layer_norm",
            embed="gpt_neox.embed_in",
            attn_out="attention",
        ),
    ]
}

_MODEL_TYPE_TO_FAMILY = {t: f for f in FAMILIES.values() for t in f.model_types}


def supported_model_types() -> list[str]:
    """Every ``config.model_type`` the engine knows."""
    return sorted(_MODEL_TYPE_TO_FAMILY)


def family_for(model_type: str) -> Family:
    """The family description for a ``config.model_type``, or a clear error."""
    try:
        return _MODEL_TYPE_TO_FAMILY[model_type]
    except KeyError:
        raise WhiteboxError(
            f"unsupported architecture {model_type!r}; supported model types: "
            f"{', '.join(supported_model_types())}. Add a Family entry in "
            "whitebox_eval/models/architectures.py to support it."
        ) from None


def get_module(root: nn.Module, path: str) -> nn.Module:
    """Resolve a dotted attribute path (``model.layers``) below ``root``."""
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass
class Architecture:
    """A family description resolved against one loaded model: sizes and modules."""

    family: Family
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_model: int
    d_ff: int
    vocab_size: int
    final_logit_softcap: float | None = None
    parallel_residual: bool = False
    """Attention and MLP read the same residual and are added together (gpt_neox's
    ``use_parallel_residual``): there is no residual between them."""
    rotary_dim: int | None = None
    """Leading dimensions of each head that RoPE rotates (gpt_neox: ``partial_rotary_factor``);
    None = all of them (or no RoPE)."""
    blocks: list[nn.Module] = field(default_factory=list, repr=False)
    model: nn.Module | None = field(default=None, repr=False)

    @classmethod
    def of(cls, model: nn.Module) -> "Architecture":
        """Describe a Hugging Face causal LM (raises WhiteboxError if unsupported)."""
        cfg = model.config
        fam = family_for(cfg.model_type)
        if fam.name == "gpt2":
            n_heads, d_model = cfg.n_head, cfg.n_embd
            n_kv, head_dim = n_heads, d_model // n_heads
            d_ff = cfg.n_inner or 4 * d_model
            n_layers = cfg.n_layer
        else:
            n_heads, d_model = cfg.num_attention_heads, cfg.hidden_size
            n_kv = getattr(cfg, "num_key_value_heads", None) or n_heads
            head_dim = getattr(cfg, "head_dim", None) or d_model // n_heads
            d_ff = cfg.intermediate_size
            n_layers = cfg.num_hidden_layers
        blocks = list(get_module(model, fam.layers))
        if len(blocks) != n_layers:
            raise WhiteboxError(f"model reports {n_layers} layers but {fam.layers} holds {len(blocks)}")
        return cls(
            family=fam,
            n_layers=n_layers,
            n_heads=n_heads,
            n_kv_heads=n_kv,
            head_dim=head_dim,
            d_model=d_model,
            d_ff=d_ff,
            vocab_size=cfg.vocab_size,
            final_logit_softcap=getattr(cfg, "final_logit_softcapping", None),
            parallel_residual=bool(getattr(cfg, "use_parallel_residual", False)),
            rotary_dim=_rotary_dim(cfg, head_dim) if fam.positional == "rope" else None,
            blocks=blocks,
            model=model,
        )

    # ---- sizes -------------------------------------------------------------
    @property
    def kv_group_size(self) -> int:
        return self.n_heads // self.n_kv_heads

    def kv_head(self, head: int) -> int:
        """The key/value head a query head reads (GQA / MQA map)."""
        return head // self.kv_group_size

    @property
    def kv_head_map(self) -> list[int]:
        return [self.kv_head(h) for h in range(self.n_heads)]

    # ---- modules ------------------------------------------------------------
    def block_part(self, layer: int, name: str) -> nn.Module:
        """A sub-module of block ``layer`` by family field name (``mlp_out``, ``attn_out``...)."""
        return get_module(self.blocks[layer], getattr(self.family, name))

    def attention(self, layer: int) -> nn.Module:
        return get_module(self.blocks[layer], self.family.attention)

    def attn_part(self, layer: int, name: str) -> nn.Module | None:
        """An attention sub-module by family field name (``q_proj``, ``k_norm``...), or None."""
        path = getattr(self.family, name)
        return None if path is None else get_module(self.attention(layer), path)

    def mlp_down(self, layer: int) -> nn.Module:
        return get_module(self.blocks[layer], self.family.mlp_down)

    def mlp_act_fn(self, layer: int) -> nn.Module:
        return get_module(self.blocks[layer], self.family.mlp_act_fn)

    @property
    def final_norm(self) -> nn.Module:
        return get_module(self.model, self.family.final_norm)

    @property
    def unembed(self) -> nn.Module:
        return get_module(self.model, self.family.unembed)

    @property
    def embed(self) -> nn.Module:
        return get_module(self.model, self.family.embed)

    # ---- weights in one orientation ([out, in], like nn.Linear) -------------
    @staticmethod
    def parameter(module: nn.Module, name: str = "weight") -> torch.Tensor:
        """``module``'s parameter, readable outside a forward: a device map that offloads the
        module (to the CPU or disk beside a GPU) leaves it on ``meta`` between forwards, and it is
        loaded here through accelerate's own hook onto the device the module computes on."""
        from accelerate.utils import align_module_device, has_offloaded_params

        if not has_offloaded_params(module):
            return getattr(module, name)
        with align_module_device(module):  # the hook's pre_forward loads it, post_forward puts meta back
            return getattr(module, name).detach()  # a new tensor, kept after the module is offloaded again

    def linear_weight(self, module: nn.Module) -> torch.Tensor:
        w = self.parameter(module)
        if not w.is_floating_point() or type(w).__name__ in ("Params4bit", "Int8Params"):
            raise WhiteboxError("this model's weights are quantized (--model-arg load_in_4bit/8bit): what reads weights "
                                "outside a forward (MUI's contribution scores, the lens) needs an unquantized load")
        return w.t() if self.family.conv1d else w

    def down_proj_weight(self, layer: int) -> torch.Tensor:
        """W_down as [d_model, d_ff]."""
        return self.linear_weight(self.mlp_down(layer))

    def o_proj_weight(self, layer: int) -> torch.Tensor:
        """W_O as [d_model, n_heads * head_dim]."""
        return self.linear_weight(self.attn_part(layer, "o_proj"))

    def unembed_weight(self) -> torch.Tensor:
        """W_U as [vocab, d_model]."""
        return self.parameter(self.unembed)

    def qkv_sizes(self) -> tuple[int, int, int]:
        """Widths of the q, k and v slices of a (possibly fused) projection output."""
        q = self.n_heads * self.head_dim
        kv = self.n_kv_heads * self.head_dim
        return q, kv, kv

    def check_layer(self, layer: int) -> int:
        if not -self.n_layers <= layer < self.n_layers:
            raise WhiteboxError(f"layer {layer} is out of range: the model has {self.n_layers} layers (0..{self.n_layers - 1})")
        return layer % self.n_layers

    def check_head(self, head: int) -> int:
        if not 0 <= head < self.n_heads:
            raise WhiteboxError(f"head {head} is out of range: the model has {self.n_heads} heads per layer (0..{self.n_heads - 1})")
        return head

    def describe(self) -> dict:
        """A plain summary for configs and reports."""
        return {
            "family": self.family.name,
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "n_kv_heads": self.n_kv_heads,
            "head_dim": self.head_dim,
            "d_model": self.d_model,
            "d_ff": self.d_ff,
            "vocab_size": self.vocab_size,
            "has_qk_norm": self.family.q_norm is not None,
            "positional": self.family.positional,
            **({"rotary_dim": self.rotary_dim} if self.rotary_dim not in (None, self.head_dim) else {}),
            **({"parallel_residual": True} if self.parallel_residual else {}),
        }


def _rotary_dim(cfg, head_dim: int) -> int | None:
    """How many leading dimensions of a head RoPE rotates (partial rotary: gpt_neox's rotary_pct,
    phi's partial_rotary_factor); None when it rotates all of them."""
    params = getattr(cfg, "rope_parameters", None) or {}
    factor = params.get("partial_rotary_factor", getattr(cfg, "partial_rotary_factor", getattr(cfg, "rotary_pct", 1.0)))
    dim = int(head_dim * float(factor if factor is not None else 1.0))
    return None if dim == head_dim else dim
