"""What every GAR study (paper 002) shares: the config base written to config.yaml, the
run folder and engine, resumable stages with stage-prefixed samples, and the headline
keys of interventions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from whitebox_eval import controls, stats
from whitebox_eval.controls import Head
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.config import GARRun
from whitebox_eval.gar.roles import EncodedExample
from whitebox_eval.gar.scoring import ExampleScore, score_from_probs
from whitebox_eval.runs import RunFolder, open_run
from whitebox_eval.runs.distributed import World
from whitebox_eval.runs.passes import run_pass


def open_gar_run(cfg: GARRun, output: str | Path, *, run_id: str | None, resume: bool,
                 data_files: Sequence[Path] | None = None, world: World | None = None, loaded=None,
                 examples=None, statements=None) -> RunFolder:
    """Create or resume the run folder of ``cfg``; ``data_files``: the files the study read. ``--edit``
    is checked first (against ``loaded``, else the model's config.json): a bad edit writes nothing; an
    edit that reaches only some of the prompts the mode scores (the ``examples``' prompts and the probe
    ``statements``, ``{file: statements}``) is counted on them (``loaded``'s tokenizer:
    :func:`coverage_model` loads it first)."""
    from whitebox_eval.gar.roles import encode_examples
    from whitebox_eval.internals.edit_coverage import counted, edit_coverage
    from whitebox_eval.sae.feature_edits import check_edits
    from whitebox_eval.tasks.token_spans import char_offsets

    check_edits(cfg.edits, loaded, cfg.model)
    coverage = {}
    if (examples is not None or statements is not None) and counted(cfg.edits):
        lengths = [e.n_tokens for e in encode_examples(examples or [], loaded.tokenizer)]
        lengths += [len(char_offsets(loaded.tokenizer, st.text)[0])
                    for sts in (statements or {}).values() for st in sts]
        coverage = edit_coverage(cfg.edits, lengths)
    return open_run(output, {**cfg.to_dict(), **coverage}, run_id=run_id, resume=resume, world=world,
                    data_files=data_files)


def coverage_model(cfg: GARRun, loaded):
    """``loaded``, or the model loaded now when an ``--edit``'s coverage is counted on the prompts
    (an ``attn:`` rule) before the run folder; else None (loaded after the folder, as before)."""
    from whitebox_eval.internals.edit_coverage import counted
    from whitebox_eval.models import load_model

    return loaded or (load_model(cfg.model, dtype=cfg.dtype) if counted(cfg.edits) else None)


def study_engine(cfg: GARRun, loaded):
    """The mode's engine: every pass under the config's ``--edit`` edits."""
    from whitebox_eval.internals import Engine
    from whitebox_eval.sae.feature_edits import user_edits

    return Engine(loaded).under(user_edits(cfg.edits, loaded))


Score = Callable[[list[int]], tuple[list[dict], dict[str, np.ndarray]]]


@dataclass
class StageOutput:
    """A finished stage: its sample records by key and its per-item arrays in key order."""

    samples: dict[str, dict]
    arrays: dict[str, np.ndarray]


def run_stage(folder: RunFolder, stage: str, keys: Sequence[str], batch_size: int, score: Score,
              show_progress: bool | None) -> StageOutput:
    """One resumable pass (:func:`~whitebox_eval.runs.passes.run_pass`) named ``stage``
    over ``keys``: ``score(indices)`` gives a record and per-item arrays for each index;
    each record is streamed as the sample ``{"id": "<stage>:<key>", "stage": stage, **record}``."""
    ids = [f"{stage}:{k}" for k in keys]

    def score_records(idx: list[int]):
        records, arrays = score(idx)
        return [{"id": ids[i], "stage": stage, **r} for i, r in zip(idx, records)], arrays

    arrays = run_pass(folder, stage, ids, batch_size, score_records, desc=stage, show_progress=show_progress)
    prefix = f"{stage}:"
    samples = {s["id"][len(prefix):]: s for s in folder.read_samples() if str(s["id"]).startswith(prefix)}
    return StageOutput(samples, arrays)


#: the rule GAR's random-head controls are drawn with (:mod:`whitebox_eval.controls`)
CONTROL_RULE = "layer-band"


def random_head_draws(selected: Sequence[tuple[int, int]], architecture: Any, draws: int,
                      seed: int) -> tuple[tuple[int, int] | None, list[list[Head]]]:
    """The control of secs. 5 and App. E: ``draws`` sets of ``len(selected)`` heads from
    the selected heads' layer band, never a selected one (controls' ``"layer-band"``
    rule; ``architecture``: an Architecture or ``(n_layers, n_heads)``).  Returns the
    band and the sets; no sets when the band holds too few other heads (the study then
    reports no control rather than stopping)."""
    band = controls.band(selected, architecture, CONTROL_RULE)
    try:
        sets = controls.random_heads(selected, architecture, draws, seed, CONTROL_RULE)
    except WhiteboxError:  # the heads are checked against the model before: too few heads in the band
        sets = []
    return band, sets


def scores_from_samples(encoded: Sequence[EncodedExample], samples: Mapping[str, dict], keys: Sequence[str],
                        rule: str) -> list[ExampleScore]:
    """The :class:`ExampleScore` of each example from its stage sample's probabilities."""
    return [score_from_probs(e, samples[k]["probs"], rule) for e, k in zip(encoded, keys)]


def estimate(metrics: Mapping[str, Any], key: str) -> stats.Estimate:
    """The :class:`stats.Estimate` stored under ``key`` by ``stats.add_*``."""
    lo, hi = metrics[stats.derived_key(key, "ci")]
    return stats.Estimate(metrics[key], lo, hi, metrics[stats.derived_key(key, "n")],
                          metrics[stats.derived_key(key, "ci_method")], metrics[stats.derived_key(key, "stderr")])


def intervention_headline(res_before: Sequence[ExampleScore], interventions: Mapping[str, dict]) -> dict:
    """Headline keys: before and after each intervention, the paper's rule (``acc``), argmax
    accuracy (``acc_argmax``), mean P(target) (``p_target``), each with its interval, and the
    number of flipped predictions (``flips``); filters name the condition."""
    from whitebox_eval.gar.metrics import score_metrics

    head: dict[str, Any] = {}
    conds = [("before", score_metrics(res_before))] + [(k, v["after"]) for k, v in interventions.items()]
    for cond, m in conds:
        for key, name in (("acc,appc", "acc"), ("acc,argmax", "acc_argmax"), ("p_target", "p_target")):
            if key in m:
                stats.add_estimate(head, f"{name},{cond}", estimate(m, key))
    for k, v in interventions.items():
        head[f"flips,{k}"] = v["predictions_changed"]
    return head
