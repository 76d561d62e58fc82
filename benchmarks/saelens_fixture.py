"""Write tests/fixtures/saelens/: small random SAEs saved by SAELens itself, inputs, and SAELens'
encode/decode outputs on them, for the parity test (tests/mui/test_sae_saelens_parity.py).

Run once in a separate environment with SAELens (never in the project's venv):

    python3 -m venv /work/saelens-venv
    /work/saelens-venv/bin/pip install torch==2.13.0 && /work/saelens-venv/bin/pip install sae-lens
    /work/saelens-venv/bin/python benchmarks/saelens_fixture.py tests/fixtures/saelens

Folders written (each with ``expected.safetensors``: ``x``, ``feature_acts`` = SAELens'
``encode(x)``, ``reconstruction`` = SAELens' ``decode(feature_acts)``):

- ``standard``, ``topk``, ``topk_rescaled`` (``rescale_acts_by_decoder_norm``, decoder rows not
  unit norm, ``apply_b_dec_to_input`` false), ``jumprelu``: ``SAE.save_model`` (cfg.json +
  sae_weights.safetensors), the SAELens on-disk layout;
- ``gemma_scope``: Gemma Scope's ``params.npz`` (``W_enc, W_dec, b_enc, b_dec, threshold``), the
  reference from a SAELens ``JumpReLUSAE`` given the state dict and config that SAELens'
  ``gemma_2_sae_huggingface_loader`` builds from that file (``apply_b_dec_to_input`` false);
- ``llama_scope``: Llama Scope's ``hyperparams.json`` + ``checkpoints/final.safetensors``
  (``encoder.weight [d_sae, d_in]``, ``decoder.weight [d_in, d_sae]``, scalar
  ``jump_relu_threshold``, dataset-wise input norm). The reference is a SAELens ``JumpReLUSAE``
  with the state dict of SAELens' ``llama_scope_sae_huggingface_loader``, applied as Llama Scope
  defines it: inputs scaled by ``s = sqrt(d_in) / dataset_average_activation_norm.in`` before
  encoding, reconstructions divided by ``s`` (SAELens' inference SAE leaves that scaling to the
  caller and folds ``s`` into the threshold instead, so its raw threshold is ``thr`` here).

``VERSIONS.json`` records the SAELens and torch versions.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch


def _randomize(sae, gen: torch.Generator, scale_dec: bool = False) -> None:
    with torch.no_grad():
        sae.W_enc.copy_(torch.randn(sae.W_enc.shape, generator=gen) / sae.cfg.d_in ** 0.5)
        dec = torch.randn(sae.W_dec.shape, generator=gen)
        dec = dec / dec.norm(dim=1, keepdim=True)
        if scale_dec:
            dec = dec * (0.5 + torch.rand(dec.shape[0], 1, generator=gen))
        sae.W_dec.copy_(dec)
        sae.b_enc.copy_(0.1 * torch.randn(sae.b_enc.shape, generator=gen))
        sae.b_dec.copy_(0.2 * torch.randn(sae.b_dec.shape, generator=gen))
        if hasattr(sae, "threshold"):
            sae.threshold.copy_(0.05 + 0.3 * torch.rand(sae.threshold.shape, generator=gen))


def _expected(sae, x: torch.Tensor, folder: Path, scale: float = 1.0) -> None:
    from safetensors.torch import save_file

    with torch.no_grad():
        acts = sae.encode(x * scale)
        recon = sae.decode(acts) / scale
    save_file({"x": x.contiguous(), "feature_acts": acts.contiguous(), "reconstruction": recon.contiguous()},
              str(folder / "expected.safetensors"))


def main(out: Path) -> None:
    import sae_lens
    from safetensors.torch import save_file
    from sae_lens import JumpReLUSAE, JumpReLUSAEConfig, StandardSAE, StandardSAEConfig, TopKSAE, TopKSAEConfig

    out.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(0)
    specs = {
        "standard": (StandardSAE, StandardSAEConfig(d_in=16, d_sae=48), False),
        "topk": (TopKSAE, TopKSAEConfig(d_in=32, d_sae=64, k=6), False),
        "topk_rescaled": (TopKSAE, TopKSAEConfig(d_in=24, d_sae=40, k=5, rescale_acts_by_decoder_norm=True,
                                                 apply_b_dec_to_input=False), True),
        "jumprelu": (JumpReLUSAE, JumpReLUSAEConfig(d_in=24, d_sae=56), False),
    }
    for name, (cls, cfg, scale_dec) in specs.items():
        cfg.metadata.hook_name = "blocks.3.hook_resid_post"
        sae = cls(cfg)
        _randomize(sae, gen, scale_dec)
        folder = out / name
        sae.save_model(folder)
        x = torch.randn(12, cfg.d_in, generator=gen)
        back = cls.load_from_disk(folder)  # what SAELens reads back from its own files
        _expected(back, x, folder)

    # Gemma Scope: params.npz, converted as SAELens' gemma_2 loader does
    d_in, d_sae = 20, 48
    sae = JumpReLUSAE(JumpReLUSAEConfig(d_in=d_in, d_sae=d_sae, apply_b_dec_to_input=False))
    _randomize(sae, gen)
    folder = out / "gemma_scope"
    folder.mkdir(exist_ok=True)
    np.savez(folder / "params.npz", **{k: v.detach().numpy() for k, v in
                                       (("W_enc", sae.W_enc), ("W_dec", sae.W_dec), ("b_enc", sae.b_enc),
                                        ("b_dec", sae.b_dec), ("threshold", sae.threshold))})
    _expected(sae, torch.randn(12, d_in, generator=gen) * 2, folder)

    # Llama Scope: hyperparams.json + checkpoints/final.safetensors (nn.Linear orientation)
    d_in, d_sae, thr, avg = 16, 40, 0.2, 7.0
    sae = JumpReLUSAE(JumpReLUSAEConfig(d_in=d_in, d_sae=d_sae, apply_b_dec_to_input=False))
    _randomize(sae, gen)
    with torch.no_grad():
        sae.threshold.fill_(thr)
    folder = out / "llama_scope"
    (folder / "checkpoints").mkdir(parents=True, exist_ok=True)
    save_file({"encoder.weight": sae.W_enc.detach().T.contiguous(), "encoder.bias": sae.b_enc.detach().clone(),
               "decoder.weight": sae.W_dec.detach().T.contiguous(), "decoder.bias": sae.b_dec.detach().clone()},
              str(folder / "checkpoints" / "final.safetensors"))
    (folder / "hyperparams.json").write_text(json.dumps({
        "d_model": d_in, "d_sae": d_sae, "act_fn": "jumprelu", "jump_relu_threshold": thr,
        "norm_activation": "dataset-wise", "dataset_average_activation_norm": {"in": avg, "out": avg},
        "hook_point_in": "blocks.3.hook_resid_post", "hook_point_out": "blocks.3.hook_resid_post",
        "apply_decoder_bias_to_pre_encoder": False, "top_k": 50}, indent=2))
    _expected(sae, torch.randn(12, d_in, generator=gen) * 3, folder, scale=d_in ** 0.5 / avg)

    (out / "VERSIONS.json").write_text(json.dumps({
        "sae_lens": sae_lens.__version__, "torch": torch.__version__,
        "written_by": "benchmarks/saelens_fixture.py"}, indent=2))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/saelens"))
