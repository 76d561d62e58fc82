"""The engine's host-side work per layer and per pass, held to a budget by counting ops.

A GPU at small batches is launch-bound: every dispatched aten op costs ~10 microseconds of
host time whatever its size, so the white-box pass costs what it dispatches beyond the bare
pass. Counted with a ``TorchDispatchMode`` on tiny bf16 models of gpu_check's three shapes
(llama, qwen2, gemma2 with its softcap path), at two depths (per layer = the slope) and two
batch sizes (per pass = what is left, which must not grow with the batch):

- extra ops per layer over the bare pass (``engine.run(batch)``): at most 10;
- extra ops per pass: at most 150, the same at batch 2 and 8 (no loop over examples);
- no host sync op (``_local_scalar_dense``, ``nonzero``, ``item``, ``equal``) inside the
  forward beyond what the bare pass has (transformers' own mask check).

For gpu_check's capture set (q at the last token, k at the option positions, attention rows
of the last token, the residual at the last token), then every capture point and every edit
of the engine's own registry (``engine.registry()``: a point or edit added later is held to
the same budget, each edit kind with the cases it declares, ``EditKind.op_cases``; a kind
without them fails),
each in both of the engine's paths: references kept in the hooks and gathered once after the
pass, and gathered in each layer (``Engine.keep_bytes = 0``); the two give the same numbers.
And the packed cloze pass against the plain forward of the same packed rows.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import op_counts as oc  # noqa: E402

FAMILIES = list(oc.FAMILIES)
PATHS = {"refs": 1 << 62, "per-layer": 0}
CAPTURES = list(oc.registry()["captures"])
EDITS = list(oc.edit_scenarios())

_BARE: dict = {}


def _bare(family: str, reference=oc.bare) -> oc.Profile:
    key = (family, reference)
    if key not in _BARE:
        _BARE[key] = oc.profile(family, reference)
    return _BARE[key]


def _hold(family: str, scenario, path: str, reference=oc.bare) -> oc.Profile:
    base = _bare(family, reference)
    got = oc.profile(family, scenario, keep=PATHS[path])
    extra = got.minus(base)
    b0, b1 = oc.BATCHES
    for b in oc.BATCHES:
        assert extra.per_layer[b] <= oc.BUDGET_PER_LAYER, f"{extra.per_layer[b]:g} extra ops per layer at batch {b}"
        assert got.syncs[b] == base.syncs[b], f"host syncs in the forward: {got.syncs[b]} (bare: {base.syncs[b]})"
    assert extra.per_pass[b0] == extra.per_pass[b1], f"per pass {extra.per_pass} grows with the batch"
    assert extra.per_pass[b1] <= oc.BUDGET_PER_PASS, f"{extra.per_pass[b1]:g} extra ops per pass"
    return extra


def _same(a, b) -> None:
    """Two results of one scenario (a Trace, PromptScores, arrays) are equal up to float32 rounding."""
    import numpy as np

    if hasattr(a, "captures"):
        for x, y in ((a.logits, b.logits), *((a.captures[k], b.captures[k]) for k in a.captures)):
            if x is not None:
                torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-5)
    elif hasattr(a, "arrays"):
        for k, v in a.arrays().items():
            np.testing.assert_allclose(v, b.arrays()[k], atol=1e-5, rtol=1e-5)
    else:
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, rtol=1e-5)


def _paths_agree(family: str, scenario) -> None:
    lm = oc.tiny(family, 2)
    batch, opts, toks = oc.batch_of(8)
    with torch.no_grad():
        out = [scenario(lm, oc.engine_of(lm, keep), batch, opts, toks)() for keep in PATHS.values()]
    _same(*out)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("family", FAMILIES)
def test_gpu_check_capture_set(family, path):
    _hold(family, oc.gpu_check_set, path)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("family", FAMILIES)
def test_the_scorers_pass_does_not_grow_with_the_batch(family, path):
    """gpu_check's white-box pass itself (mcqa's four scorers): the scores are computed for the whole
    batch at once (the logit lens in one product), so the pass's extra ops do not depend on it."""
    extra = oc.profile(family, oc.scorers, keep=PATHS[path]).minus(_bare(family))
    assert extra.per_layer[8] <= oc.BUDGET_PER_LAYER
    assert extra.per_pass[2] == extra.per_pass[8] <= 2 * oc.BUDGET_PER_PASS


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("point", CAPTURES)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_capture_point(family, point, path):
    _hold(family, oc.capture(point), path)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("edit", EDITS)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_edit_in_every_layer(family, edit, path):
    _hold(family, oc.edit_scenarios()[edit], path)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("family", FAMILIES)
def test_the_packed_cloze_pass(family, path):
    """Per-item cloze: one packed row per item under the engine's mask, log-likelihoods summed on the
    device, against the plain forward of the same packed rows."""
    _hold(family, oc.packed_cloze, path, reference=oc.packed_plain)


@pytest.mark.parametrize("family", FAMILIES)
def test_both_paths_give_the_same_numbers(family):
    for point in CAPTURES:
        _paths_agree(family, oc.capture(point))
    for name, scenario in oc.edit_scenarios().items():
        if not name.startswith("Patch"):  # a patch writes back what it read: the same in both paths by construction
            _paths_agree(family, scenario)
    _paths_agree(family, oc.gpu_check_set)
    _paths_agree(family, oc.scorers)
    _paths_agree(family, oc.packed_cloze)


def test_the_registry_is_the_engines():
    from whitebox_eval.internals import engine, requests, sites

    reg = engine.registry()
    assert set(reg["captures"]) == set(requests.CAPTURE_POINTS) == set(sites.SITES) | set(sites.ATTENTION_POINTS)
    names = {k.__name__ for k in reg["edits"]}
    assert names == {"ScaleHeads", "MaskNeurons", "EditAttention", "Patch", "Replace", "AddVector", "ClampFeature"}
    assert {e.split(":")[0].split("@")[0] for e in EDITS} == names  # every edit kind has its count
