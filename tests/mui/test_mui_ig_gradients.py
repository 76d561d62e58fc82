"""MUI integrated gradients (001 eq. 14) take gradients only to the patched activations.

Reference: the implementation before this change (``.backward()`` with every weight
requiring a gradient, gradients read by a keep_grad capture). Same float32 kernels for
the activation gradients, so the scores agree to rounding (rtol 1e-5).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

sys.path.insert(0, str(Path(__file__).parent))

from mui_testing import tiny_lm  # noqa: E402
from whitebox_eval.internals import Capture, Engine, Patch  # noqa: E402
from whitebox_eval.mui import keyneurons as kn  # noqa: E402
from whitebox_eval.mui.neuron_scores import integrated_gradient_scores, riemann_alphas  # noqa: E402

SEQS = [kn.ScoredSequence([5, 9, 17, 33], [41, 7, 12]), kn.ScoredSequence([3, 8, 21], [30, 11, 6, 40, 19])]


def _old_path(engine, lay, cfg):
    arch = engine.arch
    with torch.no_grad():
        clean = engine.run(lay.batch, [Capture("mlp_act", lay.positions, name="act")], logits=False)["act"]
    targets, valid = lay.targets, lay.valid
    groups = [list(range(arch.n_layers))] if cfg.ig_joint_layers else [[l] for l in range(arch.n_layers)]
    grads = torch.zeros(cfg.ig_steps, *clean.shape)
    for group in groups:
        for k, alpha in enumerate(riemann_alphas(cfg.ig_steps).tolist()):
            edits = [Patch("mlp_act", l, lay.positions, (alpha * clean[:, l]).detach()) for l in group]
            trace = engine.run(lay.batch, [Capture("mlp_act", lay.positions, group, name="g", keep_grad=True)],
                               edits, logits=lay.positions, grad=True)
            logp = torch.log_softmax(trace.logits.float(), dim=-1)
            logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)[valid].sum().backward()
            g = trace.grad("g").float()
            for gi, l in enumerate(group):
                grads[k, :, l] = g[:, gi]
            engine.model.zero_grad(set_to_none=True)
    a = clean.float().permute(0, 2, 1, 3)[valid]
    g = grads.permute(0, 1, 3, 2, 4)[:, valid]
    n, L, F = a.shape
    return integrated_gradient_scores(a.reshape(n, L * F), g.reshape(cfg.ig_steps, n, L * F)).reshape(n, L, F)


@pytest.mark.parametrize("joint", [False, True])
def test_ig_scores_equal_the_old_backward_path_without_weight_gradients(joint):
    lm = tiny_lm("llama")
    engine = Engine(lm)
    cfg = kn.KeyNeuronConfig(score="ig", ig_steps=3, ig_joint_layers=joint)
    old = _old_path(engine, kn._layout(engine, SEQS), cfg)
    weight = next(lm.model.parameters())
    computed = []
    handle = weight.register_hook(lambda g: computed.append(1))
    try:
        new = torch.cat(kn.token_scores(engine, SEQS, cfg))
    finally:
        handle.remove()
    torch.testing.assert_close(new, old, rtol=1e-5, atol=1e-7)
    assert not computed
    assert all(p.requires_grad and p.grad is None for p in lm.model.parameters())


def test_ig_scores_do_not_depend_on_how_many_path_points_share_a_pass(monkeypatch):
    """Path points batched as copies of the batch (all, 2 + 1, one at a time) give the same scores
    (float32; the copies only change matmul shapes: rtol 1e-5)."""
    engine = Engine(tiny_lm("llama"))
    cfg = kn.KeyNeuronConfig(score="ig", ig_steps=3)
    tokens = kn._layout(engine, SEQS).batch.input_ids.numel()
    runs = []
    for budget in (10**9, 2 * tokens, 1):
        monkeypatch.setattr(kn, "IG_TOKENS_PER_PASS", budget)
        runs.append(torch.cat(kn.token_scores(engine, SEQS, cfg)))
    for other in runs[1:]:
        torch.testing.assert_close(other, runs[0], rtol=1e-5, atol=1e-7)


class _LargestStorage(TorchDispatchMode):
    """The largest storage (bytes) any op returns while active: what a pass keeps at its peak."""

    def __init__(self):
        super().__init__()
        self.nbytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.nbytes = max(self.nbytes, t.untyped_storage().nbytes())
        return out


def test_ig_memory_does_not_grow_with_the_number_of_steps(monkeypatch):
    """Eq. 14 needs the mean gradient only: a running sum, never a tensor holding every step's
    gradient ([m, B, L, P, F], ~38 GB at 8B with 256 response tokens at batch 8). One path point
    per pass, so the passes themselves are the same size whatever m is."""
    engine = Engine(tiny_lm("llama"))
    monkeypatch.setattr(kn, "IG_TOKENS_PER_PASS", 1)
    peaks = []
    for steps in (2, 32):
        with _LargestStorage() as seen:
            kn.token_scores(engine, SEQS, kn.KeyNeuronConfig(score="ig", ig_steps=steps))
        peaks.append(seen.nbytes)
    assert peaks[1] == peaks[0]
