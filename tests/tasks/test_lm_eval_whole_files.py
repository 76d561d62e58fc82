"""Whole shared samples, every row: our ``--prompt lm-eval`` prompts equal lm-eval 0.4.13's.

``tests/fixtures/lm_eval_whole_files.json`` was written by lm-eval itself
(``benchmarks/lm_eval_fixtures.py --part whole``): for ARC-Challenge (300 rows) and
HellaSwag (200 rows) 0-shot, MMLU's three shared subjects 0- and 5-shot, and ARC 25-shot /
HellaSwag 10-shot with the samples' first rows as the training split, the sha256 of each
document's context and its continuations. Here the same files go through our loaders,
demonstration planning (lm-eval's per-item sampler, seed 1234) and lm-eval text builder;
every item must hash the same, and the item counts (lm-eval's ``n``) must be equal. No
model runs here; the log-likelihoods are compared in ``tests/integration``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lm_eval_whole_files_data import SOURCES, split_file  # noqa: E402

from whitebox_eval.runs.lm_eval_format import hash_string  # noqa: E402
from whitebox_eval.tasks import lm_eval  # noqa: E402
from whitebox_eval.tasks.demos import plan_demonstrations  # noqa: E402
from whitebox_eval.tasks.loading import load_mcq  # noqa: E402
from whitebox_eval.tasks.spec import TaskSpec  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval_whole_files.json"
RUNS = json.loads(FIXTURE.read_text(encoding="utf-8"))["runs"]


def our_requests(task: str, shots: int, demos_from: str | None = None) -> list[tuple[str, str, list[str]]]:
    """(subject, prompt hash, continuations) per evaluated item, the way ``mcqa --prompt lm-eval`` builds them."""
    spec = TaskSpec.parse(task)
    items = load_mcq(spec, 0, on_bad_row="error")
    demos, items = plan_demonstrations(TaskSpec.parse(task), shots, items, 0, "error", demos_from, lm_eval_sampler=True)
    out = []
    for it in items:
        query = lm_eval.doc(spec.record, it)
        docs = [lm_eval.doc(spec.record, d) for d in demos.for_item(it)]
        out.append((it.subject, hash_string(lm_eval.context(query, docs)), lm_eval.continuations(query)))
    return out


def compare(ours: list, theirs: list[dict], label: str) -> None:
    assert len(ours) == len(theirs), f"{label}: we evaluate {len(ours)} items, lm-eval {len(theirs)}"
    bad = [t["doc_id"] for (_, h, c), t in zip(ours, theirs) if h != t["prompt_hash"] or c != t["continuations"]]
    assert not bad, f"{label}: {len(bad)} of {len(theirs)} prompts differ from lm-eval's (doc_ids {bad[:10]})"


@pytest.mark.parametrize("key, name", [("arc_challenge/0", "arc"), ("hellaswag/0", "hellaswag")])
def test_whole_file_zero_shot(shared_datasets, key, name):
    (task, block), = RUNS[key]["tasks"].items()
    compare(our_requests(f"{name}={shared_datasets / SOURCES[name]}", 0), block["prompts"], key)


@pytest.mark.parametrize("key, name, shots", [("arc_challenge/25", "arc", 25), ("hellaswag/10", "hellaswag", 10)])
def test_leaderboard_shots_drawn_per_item_as_lm_eval_draws_them(shared_datasets, tmp_path, key, name, shots):
    evaluated, train = split_file(shared_datasets, name, tmp_path)
    (task, block), = RUNS[key]["tasks"].items()
    compare(our_requests(f"{name}={evaluated}", shots, demos_from=None), block["prompts"], key)
    # the train file is found beside the evaluated one; --demos-from names it the same way
    compare(our_requests(f"{name}={evaluated}", shots, demos_from=train), block["prompts"], key + " --demos-from")


@pytest.mark.parametrize("shots", [0, 5])
def test_mmlu_shared_subjects_every_row(shared_datasets, shots):
    ours = our_requests(f"mmlu={shared_datasets / 'mmlu' / 'test'}", shots)
    subjects = sorted({s for s, _, _ in ours})
    for task, block in RUNS[f"mmlu/{shots}"]["tasks"].items():
        subject = task[len("mmlu_"):]
        assert subject in subjects
        compare([o for o in ours if o[0] == subject], block["prompts"], f"{task} {shots}-shot")
