"""results.json's keys and writers (``add_proportion``, ``add_mean``, ``add_paired``, ...),
random-control draws, and the words a summary uses for a p-value and a paired test."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass

import numpy as np



from whitebox_eval.stats.intervals import ALPHA, LEVEL, SEED, Estimate, as_vector, bootstrap, proportion
from whitebox_eval.stats.paired import PairedTest


def split_key(key: str) -> tuple[str, str | None]:
    """``"acc,qk_head"`` -> (``"acc"``, ``"qk_head"``); ``"acc"`` -> (``"acc"``, None)."""
    name, _, filt = key.partition(",")
    return name, (filt or None)


DERIVED_SUFFIXES = ("ci", "n", "stderr", "ci_method")
"""What :func:`add_estimate` writes beside ``name,filter``: ``name_ci,filter`` = [lo, hi],
``name_n,filter``, ``name_stderr,filter``, ``name_ci_method,filter``."""


def derived_key(key: str, suffix: str) -> str:
    """The key beside ``key`` for one of its statistics: ``("acc,qk", "ci")`` -> ``"acc_ci,qk"``."""
    name, filt = split_key(key)
    return f"{name}_{suffix}" + (f",{filt}" if filt else "")


def is_derived(key: str) -> bool:
    """Whether ``key`` is one of the statistics beside an estimate (``acc_ci,qk``, ``acc_stderr,qk``, ...)."""
    return split_key(key)[0].endswith(tuple("_" + s for s in DERIVED_SUFFIXES))



# --------------------------------------------------------------------------- controls


@dataclass(frozen=True)
class Draws:
    """Random-control draws: mean, sample sd and every draw (never just the mean)."""

    mean: float
    sd: float
    draws: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.draws)

    def as_dict(self) -> dict:
        return {"mean": self.mean, "sd": self.sd, "n": self.n, "draws": list(self.draws)}

    def __str__(self) -> str:
        return f"{self.mean:.4g} ± {self.sd:.2g} (sd over {self.n} draws)"


def draws(values: Sequence[float] | np.ndarray) -> Draws:
    arr = as_vector(values, "draws")
    sd = float(np.std(arr, ddof=1)) if arr.size > 1 else 0.0
    return Draws(float(arr.mean()), sd, tuple(float(v) for v in arr))


# --------------------------------------------------------------------------- results.json


def add_estimate(results: MutableMapping, key: str, est: Estimate) -> None:
    """Write ``key`` and, beside it, its ``_ci``, ``_n``, ``_stderr`` and ``_ci_method``."""
    results[key] = est.value
    results[derived_key(key, "ci")] = [est.lo, est.hi]
    results[derived_key(key, "n")] = est.n
    results[derived_key(key, "stderr")] = est.stderr
    results[derived_key(key, "ci_method")] = est.method


def add_proportion(results: MutableMapping, key: str, correct, level: float = LEVEL) -> Estimate:
    est = proportion(correct, level)
    add_estimate(results, key, est)
    return est


def add_mean(results: MutableMapping, key: str, values, level: float = LEVEL, seed: int = SEED) -> Estimate:
    est = bootstrap(values, level=level, seed=seed)
    add_estimate(results, key, est)
    return est


def add_paired(results: MutableMapping, name: str, test: PairedTest) -> PairedTest:
    """Record a paired comparison under ``results["paired_tests"][name]``."""
    results.setdefault("paired_tests", {})[name] = test.as_dict()
    return test


def add_difference(results: MutableMapping, key: str, test: PairedTest | Mapping) -> None:
    """Write a paired test's difference as an estimate: ``key`` = diff, ``_ci``, ``_n``, ``_ci_method``."""
    t = test if isinstance(test, Mapping) else test.as_dict()
    results[key] = t["diff"]
    results[derived_key(key, "ci")] = [t["lo"], t["hi"]]
    results[derived_key(key, "n")] = t["n"]
    results[derived_key(key, "ci_method")] = t.get("ci_method", t["test"])


# --------------------------------------------------------------------------- words


def fmt_p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def verdict(test: PairedTest | Mapping, what: str = "the difference") -> str:
    """One sentence for the summary: the difference, its interval, p, n, and what it means."""
    t = test if isinstance(test, Mapping) else test.as_dict()
    head = (
        f"{what}: {t['diff']:+.4g} [{t['lo']:+.4g}, {t['hi']:+.4g}], {t['test']} {fmt_p(t['p_value'])}, n = {t['n']}"
    )
    if t["p_value"] < t.get("alpha", ALPHA):
        return head + " -- significant at 0.05"
    if t["lo"] > 0 or t["hi"] < 0:
        return head + " -- NOT significant by the test (its interval excludes 0, but too few items differ)"
    return head + " -- NOT significant: n is too small to tell this difference from chance"
