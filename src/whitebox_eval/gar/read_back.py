"""What a reproduction reads of paper 002's children beyond their summaries (the record's
``statistics``).

- ``error_shares`` (evaluate): App. C, the share of the generation errors whose top next token
  falls in one ``class`` (``other_candidate``: another candidate's first token, class 2), with
  each error's 0/1 as the statistic's arm, read from the child's samples; it must give the
  child's own ``error_analysis`` share.

``kit`` is the reproduction's readers (``at``, ``arm_of``, ``Missing``), so this module imports
none of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from whitebox_eval import stats

#: error_class -> the error_analysis share that counts it
SHARES = {"other_candidate": "share,class2_wrong_candidate", "off_candidates": "share,class1or3_off_candidates"}


def error_shares(study, spec: Mapping[str, Any], kit) -> dict[str, Any]:
    """The share of the generation errors (not KR, not generation-to-classification) in ``class``,
    its Wilson interval, and arm ``a``: each error (item id) -> 1 when it is of that class."""
    cls = str(spec["class"])
    if cls not in SHARES:
        raise kit.Missing(f"no error class {cls!r}; the child counts {', '.join(SHARES)}")
    errors = {f"{s['task_id']}#{s['index']}": s["error_class"] == cls for s in study.samples
              if not s.get("kr") and not s.get("g2c") and s.get("error_class") not in (None, "target")}
    if not errors:
        raise kit.Missing("no generation error carries an error class in the child's samples")
    est = stats.proportion(list(errors.values()))
    written = kit.at(study.results, ["error_analysis", SHARES[cls]])
    if abs(written - est.value) > 1e-12 or kit.at(study.results, ["error_analysis", "n_errors"]) != est.n:
        raise kit.Missing(f"the samples give {sum(errors.values())}/{len(errors)} errors of class {cls}, "
                          f"the child wrote a share of {written:.6f}")
    arm = kit.arm_of(f"generation errors of class {cls}", {i: float(v) for i, v in errors.items()})
    arm["answers"] = {}  # a share of errors: no answer of its own, no uninformed level
    return {"value": est.value, "lo": est.lo, "hi": est.hi, "n": est.n, "p_value": None,
            "test": "95% wilson interval", "ci_method": "wilson",
            "source": f"samples.jsonl error_class of the {est.n} generation errors", "arms": {"a": arm}}
