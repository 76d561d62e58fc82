"""Neuron scores (paper 001 eq. 2, 13-15) against hand computations."""

import pytest
import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui.neuron_scores import (
    activation_scores,
    integrated_gradient_scores,
    neuron_contribution_scores,
    response_level_scores,
    riemann_alphas,
)

# a: 2 positions x 3 neurons; W_down: d_model=2 x d_ff=3, columns c0=(1,0), c1=(0,1), c2=(2,-1)
A = torch.tensor([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0]])
W_DOWN = torch.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0]])
U = torch.tensor([[1.0, 2.0], [3.0, -1.0]])  # u_0, u_1: unembedding rows of the predicted tokens


@pytest.mark.parametrize("chunk_size", [1, 2, 256])
def test_contribution_score_by_hand(chunk_size):
    # pos 0: c.u0 = [1, 2, 2-2=0]      * a0 = [1, 4, 0]
    # pos 1: c.u1 = [3, -1, 6+1=7]     * a1 = [1.5, 1, 21]
    got = neuron_contribution_scores(A, W_DOWN, U, chunk_size=chunk_size)
    assert torch.allclose(got, torch.tensor([[1.0, 4.0, 0.0], [1.5, 1.0, 21.0]]))


def test_final_norm_weight_and_full_by_hand():
    gamma = torch.tensor([2.0, 0.5])
    # u0*gamma = (2, 1): c.u = [2, 1, 4-1=3] * a0 = [2, 2, 0]
    # u1*gamma = (6, -0.5): c.u = [6, -0.5, 12+0.5=12.5] * a1 = [3, 0.5, 37.5]
    got = neuron_contribution_scores(A, W_DOWN, U, final_norm="weight", norm_weight=gamma)
    assert torch.allclose(got, torch.tensor([[2.0, 2.0, 0.0], [3.0, 0.5, 37.5]]))
    # full: divide position 0 by 2 and position 1 by 0.5
    got = neuron_contribution_scores(
        A, W_DOWN, U, final_norm="full", norm_weight=gamma, norm_scale=torch.tensor([2.0, 0.5])
    )
    assert torch.allclose(got, torch.tensor([[1.0, 1.0, 0.0], [6.0, 1.0, 75.0]]))
    # centred (LayerNorm): gamma*u0 = (2, 1), minus mean 1.5 -> (0.5, -0.5); c.u = [0.5, -0.5, 1.5] * a0
    got = neuron_contribution_scores(A[:1], W_DOWN, U[:1], final_norm="weight", norm_weight=gamma, norm_center=True)
    assert torch.allclose(got, torch.tensor([[0.5, -1.0, 0.0]]))


def test_full_final_norm_matches_direct_logit_through_rmsnorm():
    # Ground truth: the MLP output's direct effect on the logit through a frozen-scale RMSNorm,
    # (gamma * (W_down a) / rms(resid)) . u, must equal the sum of the neuron scores.
    g = torch.Generator().manual_seed(0)
    d_model, d_ff, n = 6, 10, 4
    a = torch.randn(n, d_ff, generator=g)
    w = torch.randn(d_model, d_ff, generator=g)
    u = torch.randn(n, d_model, generator=g)
    gamma = torch.rand(d_model, generator=g) + 0.5
    resid = torch.randn(n, d_model, generator=g)
    rms = resid.pow(2).mean(-1).add(1e-6).sqrt()
    direct = ((gamma * (a @ w.T) / rms[:, None]) * u).sum(-1)
    scores = neuron_contribution_scores(a, w, u, final_norm="full", norm_weight=gamma, norm_scale=rms, chunk_size=3)
    assert torch.allclose(scores.sum(-1), direct, atol=1e-5)


def test_contribution_score_errors():
    with pytest.raises(WhiteboxError, match="d_ff"):
        neuron_contribution_scores(A, W_DOWN.T, U)
    with pytest.raises(WhiteboxError, match="norm_weight"):
        neuron_contribution_scores(A, W_DOWN, U, final_norm="weight")
    with pytest.raises(WhiteboxError, match="norm_scale"):
        neuron_contribution_scores(A, W_DOWN, U, final_norm="full", norm_weight=torch.ones(2))


def test_activation_score_is_activation():
    got = activation_scores(A)
    assert torch.equal(got, A) and got.data_ptr() != A.data_ptr()


def test_integrated_gradients_on_quadratic():
    # F(a) = sum_i w_i a_i^2, dF/da_i at alpha*a = 2 w_i alpha a_i.
    a = torch.tensor([[1.0, 2.0]])
    w = torch.tensor([3.0, -1.0])
    alphas = riemann_alphas(10)  # 0.1 .. 1.0
    assert torch.allclose(alphas, torch.arange(1, 11) / 10)
    grads = torch.stack([2 * w * al * a for al in alphas])
    # mean alpha = 0.55 -> mean grad = 2 w a 0.55; IG = a * that = 1.1 w a^2 = [3.3, -4.4]
    got = integrated_gradient_scores(a, grads)
    assert torch.allclose(got, torch.tensor([[3.3, -4.4]]))
    assert torch.allclose(integrated_gradient_scores(a, grads, absolute=True), torch.tensor([[3.3, 4.4]]))
    # the authors' linspace(0, 1, 10) has mean alpha 0.5 -> exactly w a^2 = F(a) - F(0) = [3, -4]
    grads0 = torch.stack([2 * w * al * a for al in riemann_alphas(10, include_zero=True)])
    assert torch.allclose(integrated_gradient_scores(a, grads0), torch.tensor([[3.0, -4.0]]))
    assert torch.allclose(integrated_gradient_scores(a, grads0, multiply_by_activation=False), torch.tensor([[3.0, -2.0]]))


def test_integrated_gradients_shape_error():
    with pytest.raises(WhiteboxError, match="step_gradients"):
        integrated_gradient_scores(A, torch.zeros(10, 3, 2))


def test_response_level_sum():
    s = torch.tensor([[1.0, 2.0], [3.0, 4.0], [10.0, 20.0]])
    assert torch.equal(response_level_scores(s), torch.tensor([14.0, 26.0]))
    assert torch.equal(response_level_scores(s, torch.tensor([True, True, False])), torch.tensor([4.0, 6.0]))
    s3 = torch.arange(12.0).reshape(2, 2, 3)  # [positions, layers, d_ff]
    assert torch.equal(response_level_scores(s3), s3[0] + s3[1])
