"""SAEs: hand-computed encode/decode, SAELens files, the TopK trainer (paper 001 eq. 4-6, 9)."""

import json

import pytest
import torch
from safetensors.torch import save_file

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.thresholds import feature_key_mask
from whitebox_eval.sae.encoding import SAE, reconstruction_mse, sae_feature_scores, sae_feature_scores_by_layer
from whitebox_eval.sae.training import train_topk_sae
from whitebox_eval.sae.files import load_sae, save_sae

W_ENC = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, -1.0]])  # [d_in=2, d_sae=3]
B_ENC = torch.tensor([0.0, -0.5, 0.1])
W_DEC = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # [d_sae=3, d_in=2]
B_DEC = torch.tensor([1.0, 1.0])
THRESHOLD = torch.tensor([2.5, 0.4, 1.0])
X = torch.tensor([[3.0, 2.0], [0.0, 0.0]])
# x0 - b_dec = (2, 1) -> W_enc^T: (2, 1, 2-1=1) + b_enc = (2, 0.5, 1.1)
# x1 - b_dec = (-1, -1) -> (-1, -1, 0) + b_enc = (-1, -1.5, 0.1)


def make(activation, **kw):
    return SAE(W_ENC.clone(), B_ENC.clone(), W_DEC.clone(), B_DEC.clone(), activation=activation, **kw)


def test_encode_by_hand():
    relu = make("relu").encode(X)
    assert torch.allclose(relu, torch.tensor([[2.0, 0.5, 1.1], [0.0, 0.0, 0.1]]))
    # TopK k=2: row 0 keeps 2 and 1.1; row 1 keeps 0.1 and -1 (relu -> 0)
    topk = make("topk", k=2).encode(X)
    assert torch.allclose(topk, torch.tensor([[2.0, 0.0, 1.1], [0.0, 0.0, 0.1]]))
    # JumpReLU thresholds (2.5, 0.4, 1.0): row 0 keeps 0.5 > 0.4 and 1.1 > 1.0; row 1 nothing
    jump = make("jumprelu", threshold=THRESHOLD.clone()).encode(X)
    assert torch.allclose(jump, torch.tensor([[0.0, 0.5, 1.1], [0.0, 0.0, 0.0]]))


def test_decode_by_hand_and_no_b_dec_input():
    # f = (2, 0, 1.1): W_dec^T f = (2 + 1.1, 1.1) + b_dec = (4.1, 2.1)
    assert torch.allclose(make("relu").decode(torch.tensor([[2.0, 0.0, 1.1]])), torch.tensor([[4.1, 2.1]]))
    # without subtracting b_dec: x0 -> (3, 2, 1) + b_enc = (3, 1.5, 1.1)
    sae = make("relu", apply_b_dec_to_input=False)
    assert torch.allclose(sae.encode(X[:1]), torch.tensor([[3.0, 1.5, 1.1]]))


def test_feature_scores_chunked_and_by_layer():
    sae = make("topk", k=2)
    assert torch.allclose(sae_feature_scores(sae, X, chunk_size=1), sae.encode(X))
    stacked = sae_feature_scores_by_layer([sae, make("relu")], torch.stack([X, X], dim=1))
    assert stacked.shape == (2, 2, 3)
    assert torch.allclose(stacked[:, 1], make("relu").encode(X))


def test_feature_key_mask_ignores_inactive_features():
    scores = make("topk", k=2).encode(X)[:, None, :]  # [positions, 1 layer, 3 features]
    # top-50 per layer but only features 0 and 2 are ever active
    assert feature_key_mask(scores).tolist() == [[True, False, True]]
    assert feature_key_mask(scores, "topk", 1).tolist() == [[True, False, False]]


@pytest.mark.parametrize("activation,kw", [("relu", {}), ("topk", {"k": 2}), ("jumprelu", {"threshold": THRESHOLD})])
def test_saelens_round_trip(tmp_path, activation, kw):
    sae = make(activation, **kw)
    sae.metadata.update({"hook_name": "blocks.3.hook_resid_post", "hook_layer": 3})
    folder = save_sae(sae, tmp_path / "sae")
    cfg = json.loads((folder / "cfg.json").read_text())
    assert cfg["d_in"] == 2 and cfg["d_sae"] == 3 and cfg["hook_layer"] == 3
    assert cfg["architecture"] == {"relu": "standard", "topk": "topk", "jumprelu": "jumprelu"}[activation]
    back = load_sae(folder)
    assert back.activation == activation and back.k == sae.k
    assert torch.equal(back.w_enc, sae.w_enc) and torch.equal(back.w_dec, sae.w_dec)
    assert torch.allclose(back.encode(X), sae.encode(X))
    assert back.metadata["hook_name"] == "blocks.3.hook_resid_post"


def test_lenient_loading_nn_linear_layout_and_log_threshold(tmp_path):
    folder = tmp_path / "gemma_like"
    folder.mkdir()
    save_file({
        "encoder.weight": W_ENC.T.contiguous(), "encoder.bias": B_ENC,
        "decoder.weight": W_DEC.T.contiguous(), "decoder.bias": B_DEC,
        "log_threshold": THRESHOLD.log(),
    }, str(folder / "sae_weights.safetensors"))
    (folder / "cfg.json").write_text(json.dumps({"d_in": 2, "d_sae": 3, "architecture": "jumprelu"}))
    sae = load_sae(folder)
    assert torch.allclose(sae.encode(X), torch.tensor([[0.0, 0.5, 1.1], [0.0, 0.0, 0.0]]), atol=1e-6)


def test_gemma_scope_params_npz_without_cfg(tmp_path):
    import numpy as np

    np.savez(tmp_path / "params.npz", W_enc=W_ENC.numpy(), b_enc=B_ENC.numpy(), W_dec=W_DEC.numpy(),
             b_dec=B_DEC.numpy(), threshold=THRESHOLD.numpy())
    sae = load_sae(tmp_path)
    # JumpReLU inferred from the threshold; no b_dec subtraction: x0 -> (3, 2, 1) + b_enc = (3, 1.5, 1.1),
    # all above their thresholds (2.5, 0.4, 1.0)
    assert sae.activation == "jumprelu" and not sae.apply_b_dec_to_input
    assert torch.allclose(sae.encode(X[:1]), torch.tensor([[3.0, 1.5, 1.1]]))


def test_old_saelens_topk_config(tmp_path):
    folder = tmp_path / "old"
    folder.mkdir()
    save_file({"W_enc": W_ENC, "b_enc": B_ENC, "W_dec": W_DEC, "b_dec": B_DEC}, str(folder / "sae_weights.safetensors"))
    (folder / "cfg.json").write_text(json.dumps({
        "architecture": "standard", "activation_fn_str": "topk", "activation_fn_kwargs": {"k": 2},
        "d_in": 2, "d_sae": 3, "normalize_activations": "none",
    }))
    sae = load_sae(folder / "sae_weights.safetensors")
    assert sae.activation == "topk" and sae.k == 2


def test_loading_errors(tmp_path):
    with pytest.raises(WhiteboxError, match="not found"):
        load_sae(tmp_path / "nope")
    folder = tmp_path / "bad"
    folder.mkdir()
    with pytest.raises(WhiteboxError, match="sae_weights.safetensors"):
        load_sae(folder)
    save_file({"W_enc": W_ENC, "b_enc": B_ENC}, str(folder / "sae_weights.safetensors"))
    with pytest.raises(WhiteboxError, match="W_dec"):
        load_sae(folder)
    save_file({"W_enc": W_ENC, "b_enc": B_ENC, "W_dec": W_DEC, "b_dec": B_DEC}, str(folder / "sae_weights.safetensors"))
    (folder / "cfg.json").write_text(json.dumps({"architecture": "topk", "d_in": 2, "d_sae": 3}))
    with pytest.raises(WhiteboxError, match="lacks k"):
        load_sae(folder)


def synthetic_sparse_data(n=2000, d=12, n_true=24, active=3, seed=1):
    """x = sum of `active` unit dictionary atoms with magnitudes in [1, 2]: a known sparse code."""
    g = torch.Generator().manual_seed(seed)
    atoms = torch.randn(n_true, d, generator=g)
    atoms /= atoms.norm(dim=1, keepdim=True)
    support = torch.rand(n, n_true, generator=g).argsort(dim=1)[:, :active]
    codes = torch.zeros(n, n_true).scatter_(1, support, 1 + torch.rand(n, active, generator=g))
    return codes @ atoms


def test_trainer_reduces_reconstruction_error():
    x = synthetic_sparse_data()
    variance = float(((x - x.mean(0)) ** 2).mean())  # MSE of predicting the mean
    sae = train_topk_sae(x, n_features=24, k=3, steps=300, lr=1e-2, seed=0)
    assert sae.metadata["final_mse"] < 0.3 * sae.metadata["initial_mse"]
    assert reconstruction_mse(sae, x) < 0.25 * variance
    assert torch.allclose(sae.w_dec.norm(dim=1), torch.ones(24), atol=1e-5)
    assert int((sae.encode(x) > 0).sum(dim=1).max()) <= 3


def test_trainer_is_seeded(tmp_path):
    x = synthetic_sparse_data(n=200)
    a = train_topk_sae(x, 8, 2, steps=5, seed=3)
    b = train_topk_sae(x, 8, 2, steps=5, seed=3)
    c = train_topk_sae(x, 8, 2, steps=5, seed=4)
    assert torch.equal(a.w_enc, b.w_enc) and not torch.equal(a.w_enc, c.w_enc)
    back = load_sae(save_sae(a, tmp_path / "trained"))
    assert torch.allclose(back.encode(x), a.encode(x))
    with pytest.raises(WhiteboxError):
        train_topk_sae(x, 8, 9)
