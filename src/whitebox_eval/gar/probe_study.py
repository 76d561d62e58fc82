"""The App. E truth probe (paper 002 sec. 5, table 3) as a study of its own on chosen
heads, and the probe stage the truth-heads study runs on the heads it found.

Probe files are read before the run folder is opened, inside
:func:`whitebox_eval.datafiles.recording`, so config.yaml's ``data_files`` holds their
sha256 and ``--resume`` refuses a file that changed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

import numpy as np

from whitebox_eval import controls, stats
from whitebox_eval.controls import Head
from whitebox_eval.datafiles import recording
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.probe import TruthStatements, load_truth_statements
from whitebox_eval.gar.config import GARProbeConfig, GARRun
from whitebox_eval.gar.study_base import (CONTROL_RULE, coverage_model, open_gar_run, random_head_draws, run_stage,
    study_engine)
from whitebox_eval.internals import Engine
from whitebox_eval.models import LoadedModel, load_model
from whitebox_eval.runs import RunFolder
from whitebox_eval.runs.pass_plan import plan_passes


def load_probe_files(paths: Sequence[str], *, limit: int | None, seed: int,
                     on_bad_row: str) -> tuple[dict[str, TruthStatements], list[Path]]:
    """The statements of every probe file (by path as given) and the files read, for
    config.yaml's ``data_files``."""
    with recording() as read:
        statements = {p: load_truth_statements(p, limit=limit, seed=seed, on_bad_row=on_bad_row) for p in paths}
    return statements, read


def probe_stage(path: str) -> str:
    """The pass name of one probe file's features."""
    return "probe-" + re.sub(r"[^A-Za-z0-9_-]+", "_", Path(path).stem)


def probe_passes(statements: dict[str, TruthStatements]) -> list[tuple[str, int]]:
    """``(pass, items)`` of the probe files' feature passes, for the pass plan."""
    return [(probe_stage(p), len(sts)) for p, sts in statements.items()]


def run_probe_stage(folder: RunFolder, engine: Engine, path: str, statements: TruthStatements,
                    heads: Sequence[Head], cfg: GARRun, show_progress: bool | None) -> dict:
    """Features (streamed, resumable) then the App. E MLP probe on one SNLI / GoT file, with
    its majority baseline and a random-heads control; each held-out statement's prediction (probe
    and majority right or not, its gold label) is a sample of stage ``<pass>-probe``.

    Features are taken for every head of the selected heads' layer band, so that the
    control (``cfg.random_draws`` sets of as many random heads from that band, never a
    selected one) reuses the same pass.  Protocol: an SNLI file with at least 9,000
    entailment/contradiction pairs gets App. E's 3,000/3,000/3,000 split x 5 seeds;
    anything else k-fold cross-validation (App. E's GoT protocol), and the result says which."""
    from whitebox_eval.gar.probe import SNLI_SPLIT, ProbeConfig, cross_validate_probe, split_probe, truth_features

    if not heads:
        raise WhiteboxError("the truth probe needs heads; none were found or given")
    if statements.bad_rows:
        folder.log(f"skipped {len(statements.bad_rows)} malformed row(s): " + "; ".join(statements.bad_rows))
    stage = probe_stage(path)
    keys = [f"{i}" for i in range(len(statements))]
    lo, hi = min(l for l, _ in heads), max(l for l, _ in heads)
    band = [(l, h) for l in range(lo, hi + 1) for h in range(engine.arch.n_heads)]
    col = {h: i for i, h in enumerate(band)}

    def score_features(idx: list[int]):
        x = truth_features(engine, [statements[i] for i in idx], band, batch_size=len(idx))
        return [{"label": statements[i].label, "source": statements[i].source} for i in idx], {"features": x}

    x_band = run_stage(folder, stage, keys, max(cfg.batch_size, 8), score_features, show_progress).arrays["features"]
    y = np.array([s.label for s in statements])
    x = x_band[:, [col[h] for h in heads]]
    folder.save_array(f"{stage}_features", x)
    pcfg = ProbeConfig(folds=cfg.probe_folds, seed=cfg.seed)
    snli = Path(path).suffix.lower() in (".jsonl", ".json")
    if snli and len(y) >= 3 * SNLI_SPLIT:
        probe, note = (lambda xx: split_probe(xx, y, pcfg)), None
    else:
        probe = lambda xx: cross_validate_probe(xx, y, pcfg)  # noqa: E731
        note = (f"App. E's SNLI protocol (3,000/3,000/3,000 x 5 seeds) needs {3 * SNLI_SPLIT} "
                f"entailment/contradiction pairs; this file gives {len(y)}: cross-validation instead") if snli else None
    fitted = probe(x)
    result = fitted.to_dict()
    done = folder.done_ids()  # each held-out statement's prediction, once (a resumed run refits the same)
    folder.append_samples([row for row in ({"id": f"{stage}-probe:{r['statement']}", "stage": f"{stage}-probe",
                                            "probe_file": Path(path).name, **r} for r in fitted.items(y))
                           if row["id"] not in done])
    _, sets = random_head_draws(heads, engine.arch, cfg.random_draws, cfg.seed)
    draws = [probe(x_band[:, [col[h] for h in hs]]).to_dict()["acc"] for hs in sets]
    control = None if not draws else {
        **stats.draws(draws).as_dict(), "layer_band": [lo, hi], "heads": [[list(h) for h in hs] for hs in sets],
        "control": controls.control_record(CONTROL_RULE, heads, engine.arch, cfg.seed, sets)}
    return {**result, "file": str(path), "heads": [list(h) for h in heads], "protocol_note": note,
            "random_heads": control}


def run_gar_probe(cfg: GARProbeConfig, output: str | Path = "runs", *, run_id: str | None = None,
                  resume: bool = False, loaded: LoadedModel | None = None,
                  show_progress: bool | None = None) -> RunFolder:
    """Cross-validated truth probe on ``cfg.heads``' activations for each probe file."""
    from whitebox_eval.gar.heads import parse_heads

    heads = parse_heads(cfg.heads)
    if not cfg.probe_data:
        raise WhiteboxError("give at least one --probe-data file (SNLI .jsonl or Geometry of Truth .csv)")
    statements, read = load_probe_files(cfg.probe_data, limit=cfg.probe_limit, seed=cfg.seed,
                                        on_bad_row=cfg.on_bad_row)
    loaded = coverage_model(cfg, loaded)
    folder = open_gar_run(cfg, output, run_id=run_id, resume=resume, data_files=read, loaded=loaded,
                          statements=statements)
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    engine = study_engine(cfg, loaded)  # --edit: every pass
    plan_passes(folder, probe_passes(statements))  # progress: pass k of N
    probes = {Path(p).name: run_probe_stage(folder, engine, p, statements[p], heads, cfg, show_progress)
              for p in cfg.probe_data}
    head: dict = {}  # each probe's accuracy with its interval beside it (the stats contract)
    for k, v in probes.items():
        head[f"probe,{k}"] = v["acc"]
        head.update({stats.derived_key(f"probe,{k}", s): v[stats.derived_key("acc", s)]
                     for s in stats.DERIVED_SUFFIXES if stats.derived_key("acc", s) in v})
    folder.save_results({"heads": [list(h) for h in heads], "probes": probes, "headline": head})
    return folder
