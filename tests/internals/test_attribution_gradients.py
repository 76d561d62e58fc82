"""EAP-IG takes gradients only to the attributed activations (parameters frozen for the call).

The scores equal the previous implementation's (``.backward()`` with every weight
requiring a gradient), kept here as the reference: the same float32 kernels compute
the activation gradients, only the weight gradients are skipped, so they agree to
summation-order rounding (rtol 1e-5).
"""

from __future__ import annotations

import pytest
import torch

from tiny_models import tiny_loaded
from whitebox_eval.internals import Capture, Engine, batch_from_ids, integrated_gradients, logit_difference_metric
from whitebox_eval.internals.attribution import frozen_parameters

IDS = [[5, 9, 17, 33, 2, 41, 7, 12], [3, 8, 21, 30, 11, 6, 40, 19]]
CORRUPT = [[5, 9, 17, 33, 2, 41, 7, 13], [3, 8, 21, 30, 11, 6, 40, 18]]
POINTS = ("head_out", "mlp_act", "v")


def _old_path(engine, batch, metric, steps, baseline):
    """The implementation before this change: backward() through a model whose weights require grad
    (on the current midpoint schedule, alpha = (k - 0.5) / steps, so only the gradient path differs)."""
    layers = list(range(engine.arch.n_layers))
    caps = [Capture(p, "all", layers) for p in POINTS]
    with torch.no_grad():
        e_clean = engine.arch.embed(batch.input_ids)
        e_base = engine.arch.embed(baseline.input_ids)
        clean = engine.run(batch, caps, inputs_embeds=e_clean)
        base = engine.run(batch, caps, inputs_embeds=e_base)
    grads = {p: torch.zeros_like(clean[p]) for p in POINTS}
    for k in range(1, steps + 1):
        e = (e_base + (k - 0.5) / steps * (e_clean - e_base)).detach().requires_grad_(True)
        trace = engine.run(batch, [Capture(p, "all", layers, keep_grad=True) for p in POINTS], grad=True, inputs_embeds=e)
        metric(trace.logits).sum().backward()
        for p in POINTS:
            grads[p] += trace.grad(p)
    engine.model.zero_grad(set_to_none=True)
    out = {}
    for p in POINTS:
        c = (clean[p] - base[p]) * grads[p] / steps
        out[p] = (c.sum(-1) if p != "mlp_act" else c).sum(2)
    return out


@pytest.mark.parametrize("family", ["llama", "gemma3", "gpt2"])
def test_eap_ig_scores_equal_the_old_backward_path_and_no_weight_gets_a_gradient(family):
    lm = tiny_loaded(family)
    engine = Engine(lm)
    metric = logit_difference_metric([10, 20], [11, 21])
    batch, baseline = batch_from_ids(IDS), batch_from_ids(CORRUPT)
    old = _old_path(engine, batch, metric, 4, baseline)
    weight = next(lm.model.parameters())
    computed = []
    handle = weight.register_hook(lambda g: computed.append(1))  # fires whenever this weight's gradient is computed
    try:
        new = integrated_gradients(engine, batch, metric, points=POINTS, steps=4, baseline=baseline)
    finally:
        handle.remove()
    for p in POINTS:
        torch.testing.assert_close(new.scores[p], old[p], rtol=1e-5, atol=1e-6, msg=p)
    assert not computed
    assert all(q.requires_grad and q.grad is None for q in lm.model.parameters())


def test_frozen_parameters_are_restored_after_an_error():
    lm = tiny_loaded("llama")
    lm.model.lm_head.weight.requires_grad_(False)  # a parameter frozen by the user stays frozen
    with pytest.raises(RuntimeError, match="metric failed"):
        with frozen_parameters(lm.model):
            assert not any(p.requires_grad for p in lm.model.parameters())
            raise RuntimeError("metric failed")
    frozen = [n for n, p in lm.model.named_parameters() if not p.requires_grad]
    assert frozen == ["lm_head.weight"] or (frozen == [] and lm.model.lm_head.weight is lm.model.model.embed_tokens.weight)


def test_eap_ig_works_inside_no_grad():
    """Callers often wrap evaluation in torch.no_grad(); the attribution still gets its gradients."""
    engine = Engine(tiny_loaded("llama"))
    metric = logit_difference_metric([10, 20], [11, 21])
    batch, baseline = batch_from_ids(IDS), batch_from_ids(CORRUPT)
    want = integrated_gradients(engine, batch, metric, steps=2, baseline=baseline).scores["head_out"]
    with torch.no_grad():
        got = integrated_gradients(engine, batch, metric, steps=2, baseline=baseline).scores["head_out"]
    torch.testing.assert_close(got, want, rtol=0, atol=0)  # the same computation
