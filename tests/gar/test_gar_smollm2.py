"""GAR on the bundled SmolLM2-135M: knocking out heads at the read position changes
the answer, at the stated answer A a last-layer head cannot."""

from __future__ import annotations

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.interventions import intervention_edits
from whitebox_eval.gar.roles import encode_examples
from whitebox_eval.gar.scoring import score_examples
from whitebox_eval.gar.selection import select_tasks, task_examples
from whitebox_eval.internals import Engine

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def smol():
    from whitebox_eval.models import load_model
    try:
        return Engine(load_model("smollm2-135m"))
    except WhiteboxError as e:  # pragma: no cover - bundled model not installed
        pytest.skip(f"smollm2-135m not available: {e}")


def test_knockout_at_the_read_position_changes_smollm2s_answers(smol):
    engine = smol
    enc = encode_examples(task_examples(select_tasks("truth"), 2, 0), engine.tokenizer)
    L, H = engine.arch.n_layers, engine.arch.n_heads
    every = [(l, h) for l in range(L) for h in range(H)]
    last = [(L - 1, h) for h in range(H)]
    before = score_examples(engine, enc)

    def change(heads, at):
        after = score_examples(engine, enc, edits_for=intervention_edits(engine, "knockout", heads, "Q->A", at=at))
        return max(abs(a.target_prob - b.target_prob) for a, b in zip(after, before))

    # measured: 0.78, 0.099 and exactly 0 (the same kernels: the edit touches no row that is read)
    assert change(every, "read") > 1e-3
    assert change(last, "read") > 1e-4
    assert change(last, "pattern") < 1e-6  # at A the last layer reaches nothing
