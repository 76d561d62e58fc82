"""Our SAE loader reproduces SAELens' encode/decode on SAEs SAELens itself wrote.

The fixture (tests/fixtures/saelens, written by benchmarks/saelens_fixture.py with the SAELens
version in VERSIONS.json) holds each SAE's files, inputs ``x`` and SAELens' ``encode(x)`` and
``decode(encode(x))``; SAELens is not needed here. Tolerance: both sides compute the same float32
formulas with different operation orders (matmul blocking, folded decoder norms), so values of
order 1 agree to a few ulp per term over at most 64 terms; 1e-5 absolute / relative is far below
any real difference (a wrong bias, transpose or threshold moves values by 1e-2 or more), and the
sets of active features must be identical (no input sits near a cut: the closest pre-activation
to its threshold, 0 or the k-th largest is 2.2e-4 away, 20x that tolerance).
"""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from whitebox_eval.sae.files import load_sae

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "saelens"
CASES = {"standard": "relu", "topk": "topk", "topk_rescaled": "topk", "jumprelu": "jumprelu",
         "gemma_scope": "jumprelu", "llama_scope": "jumprelu"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_feature_activations_and_reconstructions_equal_saelens(name):
    exp = load_file(str(FIXTURE / name / "expected.safetensors"))
    sae = load_sae(FIXTURE / name)
    assert sae.activation == CASES[name]
    acts = sae.encode(exp["x"])
    assert torch.equal(acts > 0, exp["feature_acts"] > 0)
    assert (exp["feature_acts"] > 0).any(dim=1).all()  # every input activates something: the check has teeth
    torch.testing.assert_close(acts, exp["feature_acts"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(sae.decode(acts), exp["reconstruction"], atol=1e-5, rtol=1e-5)


def test_fixture_records_its_saelens_version_and_stays_small():
    versions = json.loads((FIXTURE / "VERSIONS.json").read_text())
    assert versions["sae_lens"] and versions["torch"]
    assert sum(f.stat().st_size for f in FIXTURE.rglob("*") if f.is_file()) < 1_000_000


def test_hook_layers_are_read_from_saelens_and_llama_scope_configs():
    assert load_sae(FIXTURE / "topk").metadata["hook_name"] == "blocks.3.hook_resid_post"
    assert load_sae(FIXTURE / "llama_scope").metadata["hook_layer"] == 3
