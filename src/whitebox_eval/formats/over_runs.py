"""Paper 004 across runs: alignment error against MCQ performance over formats runs of one task
(Fig. 6), what ``whitebox-eval formats-compare`` prints and draws."""

from __future__ import annotations

from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.formats.answered import complete
from whitebox_eval.runs.finished import read
from whitebox_eval.runs.folder import RunFolder


def compare_runs(run_dirs: list[str | Path]) -> dict:
    """Alignment error vs MCQ P(correct) across formats runs of one task (004 Fig. 6).

    One row per run (model, n, ``p_correct,renorm``, ``p_correct,free`` (Fig. 7),
    ``alignment_error,mcq~free`` and the off-format share per free format ``off_format,{f}`` with their
    intervals; a run written before the class derives it when read, :mod:`.answered`) and the Pearson r across runs (undefined below 3 runs or
    without variance, with the reason). Refuses runs of different tasks or shot counts.
    """
    from whitebox_eval.formats.metrics import correlation_or_reason

    rows = []
    for d in run_dirs:
        folder = RunFolder.open(d)
        if folder.config.get("suite") != "formats":
            raise WhiteboxError(f"{d} is not a formats run (suite {folder.config.get('suite')!r})")
        try:
            study = read(folder.path)
            complete(study.results, study.samples, study.config)  # a run written before the class: from its texts
            res = study.results
        except (FileNotFoundError, WhiteboxError) as e:
            raise WhiteboxError(f"{d} has no results.json yet; finish it with --resume") from e
        if "p_correct,renorm" not in res:
            raise WhiteboxError(f"{d} was written by an older formats study; rerun it")
        rows.append({"run": str(folder.path), "model": folder.config.get("model"), "task": folder.config.get("task"),
                     "shots": folder.config.get("shots", 0), "n": res["n_items"],
                     **{k: res[k] for k in ("p_correct,renorm", "p_correct_ci,renorm", "p_correct,free",
                                            "p_correct_ci,free", "alignment_error,mcq~free",
                                            "alignment_error_ci,mcq~free")},
                     **{k: res.get(k) for k in ("off_format,free", "off_format_ci,free", "off_format,free_options",
                                                "off_format_ci,free_options")}})
    for key in ("task", "shots"):
        values = sorted({str(r[key]) for r in rows})
        if len(values) > 1:
            raise WhiteboxError(f"the runs differ in {key} ({', '.join(values)}); Fig. 6 compares models on one task and shot count")
    out: dict = {"runs": rows, "n_runs": len(rows)}
    if len(rows) < 3:
        out["pearson"], out["pearson_reason"] = None, f"needs >= 3 runs (got {len(rows)})"
    else:
        x = [r["p_correct,renorm"] for r in rows]
        y = [r["alignment_error,mcq~free"] for r in rows]
        out["pearson"], out["pearson_reason"] = correlation_or_reason(x, y, ("MCQ P(correct)", "alignment error"))
    return out
