"""What a reproduction reads of paper 002's children beyond their summaries (the record's
``statistics``).

- ``error_shares`` (evaluate): App. C, the share of the generation errors whose top next token
  falls in one ``class`` (``other_candidate``: another candidate's first token, class 2), with
  each error's 0/1 as the statistic's arm, read from the child's samples; off-format outputs (no
  answer at all, :func:`whitebox_eval.gar.evaluation.off_format`) are their own class, counted and
  reported beside the share, never an error of any class. It must give the child's own
  ``error_analysis`` share (a child written before the off-format class is reclassified from each
  sample's top token, and says so). The off-format block has the shape of every paper's
  (:func:`whitebox_eval.tasks.answers.off_format_share`: count, share, Wilson interval), and each wrong
  output's class is the statistic's ``observations`` (ids, classes, the class counted), from which
  recompute_claims rebuilds the block and the arm.

``kit`` is the reproduction's readers (``at``, ``arm_of``, ``Missing``), so this module imports
none of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from whitebox_eval import stats
from whitebox_eval.tasks.answers import off_format_share

#: what an off-format wrong output is (:func:`whitebox_eval.gar.evaluation.off_format`)
DEFINITION = ("top next token with no letter or digit, a special token, or an article (a, an, the): no answer, "
              "its own class")

#: error_class -> the error_analysis share that counts it
SHARES = {"other_candidate": "share,class2_wrong_candidate", "off_candidates": "share,class1or3_off_candidates"}


def error_shares(study, spec: Mapping[str, Any], kit) -> dict[str, Any]:
    """The share of the generation errors (not KR, not generation-to-classification; off-format
    outputs left out and counted beside) in ``class``, its Wilson interval, and arm ``a``: each
    error (item id) -> 1 when it is of that class."""
    from whitebox_eval.gar.evaluation import error_class_of, off_format

    cls = str(spec["class"])
    if cls not in SHARES:
        raise kit.Missing(f"no error class {cls!r}; the child counts {', '.join(SHARES)}")
    wrong = {f"{s['task_id']}#{s['index']}": s for s in study.samples
             if not s.get("kr") and not s.get("g2c") and s.get("error_class") not in (None, "target")}
    classes = {i: error_class_of(s) for i, s in wrong.items()}
    errors = {i: c == cls for i, c in classes.items() if c != "off_format"}
    if not errors:
        raise kit.Missing("no generation error carries an error class in the child's samples")
    est = stats.proportion(list(errors.values()))
    analysis = kit.at(study.results, ["error_analysis"])
    reclassified = "share,off_format" not in analysis  # written before the class: its shares fold it in
    as_written = {i: s["error_class"] == cls for i, s in wrong.items()} if reclassified else errors
    written = stats.proportion(list(as_written.values()))
    if abs(kit.at(analysis, [SHARES[cls]]) - written.value) > 1e-12 or analysis.get("n_errors") != written.n:
        raise kit.Missing(f"the samples give {sum(as_written.values())}/{len(as_written)} errors of class {cls}, "
                          f"the child wrote a share of {analysis[SHARES[cls]]:.6f}")
    n_off = len(wrong) - len(errors)
    tokens = sorted({str(s.get("top_token")) for s in wrong.values() if off_format(s.get("top_token"))})
    arm = kit.arm_of(f"generation errors of class {cls}", {i: float(v) for i, v in errors.items()})
    arm["answers"] = {}  # a share of errors: no answer of its own, no uninformed level
    return {"value": est.value, "lo": est.lo, "hi": est.hi, "n": est.n, "p_value": None,
            "test": "95% wilson interval", "ci_method": "wilson",
            "off_format": {**off_format_share([c == "off_format" for c in classes.values()], DEFINITION),
                           "tokens": tokens[:10]},
            "observations": {"ids": list(classes), "class": list(classes.values()), "counted": cls},
            "source": f"samples.jsonl error_class of the {est.n} generation errors ({n_off} of {len(wrong)} wrong "
                      f"outputs off-format, counted apart{', reclassified from their top tokens' if reclassified else ''})",
            "arms": {"a": arm}}
