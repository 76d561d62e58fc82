"""The project's one table of hook names: what SAELens / TransformerLens, Gemma Scope and Llama
Scope call a site of the model, as the engine's capture point (and layer).

==============================  ============  ===============================================
name                            point         what the engine reads
==============================  ============  ===============================================
blocks.L.hook_resid_pre         resid_pre     the residual entering block L
blocks.L.hook_resid_mid         resid_mid     the residual between attention and MLP (refused
                                              where both read the same residual: gpt_neox's
                                              parallel residual)
blocks.L.hook_resid_post        resid         the residual leaving block L
blocks.L.hook_mlp_out           mlp_out       what the MLP adds to the residual (after the
                                              post-MLP norm in gemma2/3 and olmo2)
blocks.L.hook_attn_out          attn_out      what attention adds to the residual (after the
                                              post-attention norm in gemma2/3 and olmo2)
blocks.L.attn.hook_z            head_out      per-head outputs, the input of o_proj; an SAE
                                              reads them concatenated [n_heads * head_dim]
blocks.L.attn.hook_q/_k/_v      q, k, v       pre-RoPE queries, keys, values
blocks.L.attn.hook_rot_q/_k     q_rot, k_rot  post-RoPE queries, keys
blocks.L.attn.hook_pattern      attn          post-softmax attention rows
blocks.L.mlp.hook_post          mlp_act       the input of the down projection
==============================  ============  ===============================================

Hugging Face module paths (Gemma Scope 2's ``hf_hook_point_in``) resolve through the model's
family: ``model.layers.L.output`` / ``.input`` are the block's output / input residual, and
``model.layers.L.<module>.output`` is ``mlp_out`` / ``attn_out`` where ``<module>`` is the
family's ``mlp_out`` / ``attn_out`` module (gemma: ``post_feedforward_layernorm``,
``post_attention_layernorm``), ``<o_proj>.input`` is ``head_out``, ``<down_proj>.input``
``mlp_act``. Gemma Scope 1 names its site in the repository (``-res``, ``-mlp``, ``-att``) and
the layer in the path (``layer_N``); Gemma Scope 2 in the first folder (``resid_post``,
``mlp_out``, ``attn_out``, with or without ``_all``); Llama Scope in ``hyperparams.json``
(``hook_point_in``) or the folder (``L15R``, ``L15M``, ``L15A``). A name that is none of these, or a
site the table lists as not served, is refused in one line naming it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from whitebox_eval.errors import WhiteboxError

#: TransformerLens / SAELens hook names (the part after ``blocks.L.``) -> capture point
TL_HOOKS = {
    "hook_resid_pre": "resid_pre", "hook_resid_mid": "resid_mid", "hook_resid_post": "resid",
    "hook_mlp_out": "mlp_out", "hook_attn_out": "attn_out",
    "attn.hook_z": "head_out", "hook_z": "head_out",
    "attn.hook_q": "q", "attn.hook_k": "k", "attn.hook_v": "v",
    "attn.hook_rot_q": "q_rot", "attn.hook_rot_k": "k_rot", "attn.hook_pattern": "attn",
    "mlp.hook_post": "mlp_act",
}
#: the canonical name of each point a block serves (recorded in config.yaml, shown in errors)
HOOK_OF_POINT = {"resid_pre": "hook_resid_pre", "resid_mid": "hook_resid_mid", "resid": "hook_resid_post",
                 "mlp_out": "hook_mlp_out", "attn_out": "hook_attn_out", "head_out": "attn.hook_z",
                 "q": "attn.hook_q", "k": "attn.hook_k", "v": "attn.hook_v", "q_rot": "attn.hook_rot_q",
                 "k_rot": "attn.hook_rot_k", "attn": "attn.hook_pattern", "mlp_act": "mlp.hook_post"}
#: hook names that exist in TransformerLens but that the engine does not capture, with what to use
NOT_SERVED = {
    "attn.hook_result": "per-head outputs after o_proj are not captured; use attn.hook_z (head_out) or hook_attn_out",
    "attn.hook_attn_scores": "pre-softmax scores are not captured; use attn.hook_pattern",
    "mlp.hook_pre": "the MLP's pre-activation is not captured; use mlp.hook_post (mlp_act)",
    "mlp.hook_pre_linear": "the MLP's pre-activation is not captured; use mlp.hook_post (mlp_act)",
    "hook_mlp_in": "the MLP's input is not captured; use hook_resid_mid (the residual it normalises)",
    "hook_attn_in": "attention's input is not captured; use hook_resid_pre",
    "hook_q_input": "attention's input is not captured; use hook_resid_pre",
    "hook_k_input": "attention's input is not captured; use hook_resid_pre",
    "hook_v_input": "attention's input is not captured; use hook_resid_pre",
    "ln1.hook_normalized": "normalised block inputs are not captured; use hook_resid_pre",
    "ln2.hook_normalized": "normalised block inputs are not captured; use hook_resid_mid",
    "ln1.hook_scale": "norm scales are not captured", "ln2.hook_scale": "norm scales are not captured",
}
#: points an SAE can read: one vector per token (per-head points concatenated over the heads)
SAE_POINTS = ("resid_pre", "resid_mid", "resid", "mlp_out", "attn_out", "head_out", "mlp_act")
#: points a Patch can replace: a block's own residual variable is read before resid_mid's module,
#: so replacing that module's input would change only the MLP's input, not the residual
UNPATCHABLE = {"resid_mid": "the residual between attention and MLP is read by the block before its "
                            "MLP-side module sees it; patch hook_attn_out or hook_resid_pre instead"}


@dataclass(frozen=True)
class HookPoint:
    """A name resolved: the engine's capture point and, where the name says, its layer."""

    point: str
    layer: int | None
    name: str

    @property
    def hook_name(self) -> str:
        """The TransformerLens spelling (``blocks.L.hook_mlp_out``), for records."""
        base = HOOK_OF_POINT.get(self.point, self.point)
        return base if self.layer is None else f"blocks.{self.layer}.{base}"


_BLOCK = re.compile(r"^blocks\.(\d+)\.(.+)$")
_HF = re.compile(r"^(?:model\.)?(?:model\.|transformer\.|gpt_neox\.)?(?:layers|h)\.(\d+)(?:\.(.+))?\.(input|output)$")


def parse_hook(name: str, family=None) -> HookPoint:
    """``name`` as a capture point: a capture point itself, a TransformerLens name (with or without
    ``blocks.L.``) or, given the model's ``family``, a Hugging Face module path. One line otherwise."""
    from whitebox_eval.internals.requests import CAPTURE_POINTS

    name = str(name).strip()
    if name in CAPTURE_POINTS:
        return HookPoint(name, None, name)
    m = _BLOCK.match(name)
    layer, rest = (int(m.group(1)), m.group(2)) if m else (None, name)
    if rest in TL_HOOKS:
        return HookPoint(TL_HOOKS[rest], layer, name)
    if rest in NOT_SERVED:
        raise WhiteboxError(f"hook {name!r} is not served: {NOT_SERVED[rest]}")
    if rest in ("hook_embed", "hook_pos_embed", "ln_final.hook_normalized", "ln_final.hook_scale") or \
            name in ("hook_embed", "hook_pos_embed", "ln_final.hook_normalized"):
        raise WhiteboxError(f"hook {name!r} is not served: it is outside the blocks; use blocks.0.hook_resid_pre "
                            "(the embeddings) or blocks.<last>.hook_resid_post")
    h = _HF.match(name)
    if h:
        return _hf_path(name, int(h.group(1)), h.group(2), h.group(3), family)
    raise WhiteboxError(f"unknown capture point or hook name {name!r}: use a capture point or a TransformerLens "
                        "name (blocks.L.hook_resid_post, hook_resid_pre, hook_resid_mid, hook_mlp_out, hook_attn_out, "
                        "attn.hook_z, mlp.hook_post)")


def _hf_path(name: str, layer: int, module: str | None, io: str, family) -> HookPoint:
    if module is None:
        return HookPoint("resid" if io == "output" else "resid_pre", layer, name)
    if family is None:
        raise WhiteboxError(f"hook {name!r} is a module path of the model: it resolves once the model is loaded")
    attention = family.attention
    sites = {
        (family.mlp_out, "output"): "mlp_out",
        (family.attn_out, "output"): "attn_out",
        (f"{attention}.{family.o_proj}", "input"): "head_out",
        (family.mlp_down, "input"): "mlp_act",
    }
    if family.resid_mid is not None:
        sites[(family.resid_mid, "input")] = "resid_mid"
    if (module, io) in sites:
        return HookPoint(sites[(module, io)], layer, name)
    raise WhiteboxError(f"hook {name!r}: {family.name} has no capture point at {module}.{io} (the points: "
                        f"{family.mlp_out}.output = hook_mlp_out, {family.attn_out}.output = hook_attn_out, "
                        f"{attention}.{family.o_proj}.input = attn.hook_z, layers.L.output = hook_resid_post)")


def check_served(point: str, arch, name: str | None = None) -> None:
    """Refuse, in one line naming the hook, a point this model's family cannot serve."""
    if point == "resid_mid" and (arch.family.resid_mid is None or arch.parallel_residual):
        raise WhiteboxError(f"hook {name or 'hook_resid_mid'!r} is not served by {arch.family.name}: attention and "
                            "MLP read the same residual (parallel residual), so there is no residual between them")


def capture_alias(c, arch):
    """A :class:`~whitebox_eval.internals.requests.Capture` whose point may be a hook name, as the
    engine's own point (a name's layer becomes the capture's layers; the trace key is unchanged)."""
    from whitebox_eval.internals.requests import CAPTURE_POINTS

    if c.point in CAPTURE_POINTS:
        check_served(c.point, arch)
        return c
    hp = parse_hook(c.point, arch.family)
    check_served(hp.point, arch, c.point)
    layers = c.layers
    if hp.layer is not None:
        if layers is not None and [int(l) for l in layers] != [hp.layer]:
            raise WhiteboxError(f"capture {c.point!r} names layer {hp.layer} but layers={list(layers)} was given")
        layers = [hp.layer]
    return dataclasses.replace(c, point=hp.point, layers=layers, name=c.key)


def patch_alias(e, arch):
    """A Patch whose point may be a hook name, as the engine's own point (refusing unpatchable sites)."""
    from whitebox_eval.internals.requests import CAPTURE_POINTS

    hp = HookPoint(e.point, None, e.point) if e.point in CAPTURE_POINTS else parse_hook(e.point, arch.family)
    check_served(hp.point, arch, e.point)
    if hp.point in UNPATCHABLE:
        raise WhiteboxError(f"cannot patch {e.point!r}: {UNPATCHABLE[hp.point]}")
    if hp.layer is not None and arch.check_layer(e.layer) != hp.layer:
        raise WhiteboxError(f"patch {e.point!r} names layer {hp.layer} but layer={e.layer} was given")
    return e if hp.point == e.point else dataclasses.replace(e, point=hp.point)


def point_width(arch, point: str) -> int:
    """The width of one token's vector at ``point`` (per-head points concatenated over the heads)."""
    widths = {"resid_pre": arch.d_model, "resid_mid": arch.d_model, "resid": arch.d_model,
              "mlp_out": arch.d_model, "attn_out": arch.d_model, "head_out": arch.n_heads * arch.head_dim,
              "q": arch.n_heads * arch.head_dim, "k": arch.n_kv_heads * arch.head_dim,
              "v": arch.n_kv_heads * arch.head_dim, "mlp_act": arch.d_ff, "mlp_gate_act": arch.d_ff,
              "q_proj": arch.n_heads * arch.head_dim, "k_proj": arch.n_kv_heads * arch.head_dim}
    if point not in widths:
        raise WhiteboxError(f"capture point {point!r} has no single vector per token")
    return widths[point]


# ---- SAE releases that name their site in the repository or folder --------------------------
_GS1_KINDS = {"res": "resid", "mlp": "mlp_out", "att": "head_out"}
_GS2_FOLDERS = {"resid_post": "resid", "mlp_out": "mlp_out", "attn_out": "head_out"}
_LLAMA_SCOPE = {"R": "resid", "M": "mlp_out", "A": "attn_out"}


def hook_from_names(repo: str | None, path: str) -> HookPoint | None:
    """The site and layer an SAE release spells in its names, or None where they say nothing:
    Gemma Scope 1 (``google/gemma-scope-2b-pt-res`` + ``layer_20/width_16k/...``; ``-att`` SAEs
    read ``hook_z``), Gemma Scope 2 (``resid_post/layer_12_width_16k_l0_small``; ``attn_out``
    folders read ``o_proj``'s input, i.e. ``hook_z``), Llama Scope (``Llama3_1-8B-Base-L15R-8x``)."""
    text = f"{repo or ''}/{path}"
    layer = re.search(r"layer_(\d+)", path)
    gs1 = re.search(r"gemma-scope-[^/]*-(res|mlp|att)(?:-canonical)?(?:/|$)", text)
    if gs1 and layer:
        point = _GS1_KINDS[gs1.group(1)]
        return HookPoint(point, int(layer.group(1)), f"blocks.{layer.group(1)}.{HOOK_OF_POINT[point]}")
    first = path.strip("/").split("/")[0]
    folder = first[:-4] if first.endswith("_all") else first
    if folder in _GS2_FOLDERS and layer:
        point = _GS2_FOLDERS[folder]
        return HookPoint(point, int(layer.group(1)), f"blocks.{layer.group(1)}.{HOOK_OF_POINT[point]}")
    ls = re.search(r"-L(\d+)([RMA])-\d+x", text)
    if ls:
        point = _LLAMA_SCOPE[ls.group(2)]
        return HookPoint(point, int(ls.group(1)), f"blocks.{ls.group(1)}.{HOOK_OF_POINT[point]}")
    return None
