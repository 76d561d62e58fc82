"""Recompute a reproduction's statistics from its claims.json and evidence.json.gz alone, with
scipy and statsmodels -- independent of whitebox_eval (this file imports nothing of it).

    python benchmarks/recompute_claims.py FOLDER [FOLDER...]

For every claim x model it recomputes what its evidence allows and compares it with what
claims.json says:

- each arm's uninformed level (the best constant answer, the uniform guess 1/K) from the answer
  keys, and its test: exact binomial (greater) for 0/1 arms, a one-sample t-test of the mean for continuous ones
  (the exact sign test a report written before it names);
- the statistic: exact McNemar (b, c, p, the difference and its exact interval: the Clopper-Pearson
  product) from two 0/1 arms on the same items; a difference of means of two groups with its
  permutation p, and the paired bootstrap's p, by Monte Carlo here (tolerance below); a stratified
  difference (CMH weights) and its within-strata permutation p (Monte Carlo), by task from the arms'
  strata or by token position from the tokens' positions, with its interval (the strata's normal SE;
  within position (x length bin), a cluster bootstrap over sequences, Monte Carlo), and a correlation
  within strata (Fisher z, weights n - 3) -- whether it decided or stands beside the pooled one; TOST's p from the
  value and standard error; the Utility Law's A and its t-interval (statsmodels OLS); MUI of correct
  vs incorrect responses rarefied to the same size (exact expectation), its jackknife interval and
  its permutation p (Monte Carlo), from each response's key units; MUI's change between two
  checkpoints on the same responses with its paired delete-one jackknife interval and p, from each
  response's key units at both; MUI's Kendall trend over a training's checkpoints with its exact
  order p and the items' jackknife, from each item's key units at each checkpoint; a Pearson r and its percentile bootstrap interval (Monte Carlo);
- 000's PA stability: the baseline's relative PA drop minus the head's, from each test item's
  accuracy and PA, with its paired bootstrap (Monte Carlo);
- 004's off-format class: each question's P(correct) among its answers, the questions without one and
  the off-format share with its Wilson interval, from each question's counts of right, wrong and
  off-format generations (the classification of each text is the child's; the counts are the evidence);
  001's likewise: the off-format responses' count and Wilson interval from each response's class, and the
  rarefied MUI comparison with them left out (right vs wrong); a refused or not-tested 001 cell's
  top-level off-format block by the same check, from each response's class (``cell.observations``;
  from its own count where a report before them keeps none); 002's off-format wrong outputs alike,
  from each wrong output's class, and the class-2 arm's 0/1 from the same classes;
  its correlation and partition claims as any Pearson r and permutation, from the arms' per-question
  P(correct) among the answers (a question without an answer is in no arm; its counts are not evidence there);
- random-draw controls' rank p; Holm's adjusted p-values within each paper (statsmodels).

Monte Carlo p-values (permutation, bootstrap) are compared within five standard errors of the
difference of two independent Monte Carlo estimates of R resamples each, ``max(0.01, 5 sqrt(2) sd)``
with ``sd = sqrt(p (1 - p) / R)``, or ``2 sqrt(t (1 - t) / R)`` with ``t = p / 2`` for a p-value that
doubles its smaller tail (the paired bootstrap); everything else to 1e-9. Prints one line per
disagreement and a count; exits 1 if any. A percentile bootstrap interval is compared end by end within
five standard errors of the difference of two Monte Carlo estimates of its quantile (read off our
own resamples). A share with its Wilson interval (App. C's class-2 errors) is recomputed from each
counted item's 0/1, and its p against the claim's boundary from that interval. What only a claim's
summaries allow -- a McNemar from its discordant counts (truth probes written before their
per-statement samples), a share from value x n, a difference of two effects from each side's value
and SE -- is recomputed and named as such ("from summaries"); what the evidence cannot recompute
at all is counted and named, never passed.
"""

from __future__ import annotations

import gzip
import json
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from scipy import stats as st

TOL = 1e-9
ALPHA = 0.05


def load(folder: Path) -> tuple[dict, dict]:
    content = json.loads((folder / "claims.json").read_text(encoding="utf-8"))
    path = folder / content.get("evidence", "evidence.json.gz")
    evidence = json.loads(gzip.decompress(path.read_bytes())) if path.is_file() else {}
    return content, evidence


def mc_tol(p: float, resamples: int, doubled: bool = False) -> float:
    """Five standard errors of the difference of two Monte Carlo p-values of ``resamples`` each."""
    t = p / 2 if doubled else p
    sd = (2 if doubled else 1) * math.sqrt(max(t * (1 - t), 1e-12) / resamples)
    return max(0.01, 5 * math.sqrt(2) * sd)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(st.beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(st.beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def mcnemar_interval(b: int, c: int, n: int) -> tuple[float, float]:
    m = b + c
    if m == 0:
        u = clopper_pearson(0, n)[1]
        return -u, u
    p_lo, p_hi = clopper_pearson(b, m)
    r_lo, r_hi = clopper_pearson(m, n)
    ends = [r * (2 * q - 1) for r in (r_lo, r_hi) for q in (p_lo, p_hi)]
    d = (b - c) / n
    return min([d, *ends]), max([d, *ends])


def level_of(answers: dict, ids: list[str]) -> tuple[float, float]:
    rows = [answers[i] for i in ids if i in answers]
    texts = Counter(str(r[1]) for r in rows)
    pos = Counter(r[2] for r in rows if r[2] is not None)
    constant = max(max(texts.values()), max(pos.values()) if pos else 0) / len(rows)
    uniform = float(np.mean([1.0 / r[0] if r[0] else 0.0 for r in rows]))
    return constant, uniform


class Check:
    def __init__(self) -> None:
        self.done = Counter()
        self.bad: list[str] = []
        self.unrecomputed = Counter()
        self.from_counts = Counter()  # recomputed from a claim's summaries (counts, sides): no per-item values
        self.untested = Counter()  # a refused or not-tested cell's reported numbers, checked against their own counts
        self.older = Counter()  # a report written before per-item evidence of a tested cell's side block

    def same(self, where: str, what: str, ours: float, theirs: float, tol: float = TOL) -> None:
        self.done[what] += 1
        if theirs is None or ours is None or not (abs(float(ours) - float(theirs)) <= tol):
            self.bad.append(f"{where}: {what} recomputed {ours!r}, claims.json {theirs!r} (tolerance {tol:g})")


def arms_with_items(c: dict, ev: dict) -> dict:
    out = {}
    for name, arm in (c.get("arms") or {}).items():
        extra = (ev.get("arms") or {}).get(name) or {}
        if "items" in extra:
            out[name] = {**arm, **extra}
    return out


def check_chance(where: str, c: dict, arms: dict, ck: Check) -> None:
    for name, lv in ((c.get("rules") or {}).get("chance") or {}).get("arms", {}).items():
        if lv.get("level") is None or name not in arms or "answers" not in arms[name]:
            continue
        a = arms[name]
        ids = sorted(a["items"])
        constant, uniform = level_of(a["answers"], ids)
        ck.same(where, f"arm {name} constant-answer level", constant, lv["constant"])
        ck.same(where, f"arm {name} uniform-guess level", uniform, lv["uniform"])
        level = max(constant, uniform)
        x = np.array([float(a["items"][i]) for i in ids])
        if np.all((x == 0) | (x == 1)):
            p = 1.0 if level >= 1 else st.binomtest(int(x.sum()), x.size, level, alternative="greater").pvalue
        elif str(lv.get("test", "")).startswith("exact sign test"):  # a report written before the t-test
            pos, neg = int((x > level).sum()), int((x < level).sum())
            p = st.binomtest(pos, pos + neg, 0.5, alternative="greater").pvalue if pos + neg else 1.0
        elif x.size < 2 or np.ptp(x) == 0:  # a mean against its level: one-sample t, constant values by their side
            p = 0.0 if x.size and bool(np.all(x > level)) else 1.0
        else:
            p = st.ttest_1samp(x, level, alternative="greater").pvalue
        ck.same(where, f"arm {name} chance p", float(p), lv["p_value"])


def check_statistic(where: str, c: dict, arms: dict, ck: Check, rng: np.random.Generator, tokens: dict | None = None) -> None:
    s = c.get("statistic") or {}
    test = str(s.get("test") or "")
    a, b = arms.get("a"), arms.get("b")
    twin = s if "pooled" in s else s.get("stratified")  # the within-strata statistic, deciding or beside
    if isinstance(twin, dict) and "value" in twin:
        what = "decided" if twin is s else "beside"
        if a and b and "strata" in a and "strata" in b and str(twin.get("test", "")).startswith("Pearson r within"):
            check_fisher_z(where, twin, a, b, ck)
        elif a and b and "strata" in a and "strata" in b:
            check_within_strata(where, twin, a, b, ck, rng)
        elif tokens and "position" in tokens:
            check_within_position(where, twin, tokens, ck, rng)
        else:
            ck.unrecomputed[f"within-strata statistic ({what}) without strata in the evidence"] += 1
        if twin is s:
            return
    paired_items = a and b and set(a["items"]) == set(b["items"])
    if test == "mcnemar_exact" and (paired_items or {"b", "c", "n"} <= set(s)):
        if paired_items:
            ids = sorted(a["items"])
            x = np.array([a["items"][i] for i in ids], bool)
            y = np.array([b["items"][i] for i in ids], bool)
            bb, cc, n = int((x & ~y).sum()), int((~x & y).sum()), len(ids)
            ck.same(where, "McNemar b", bb, s.get("b", bb))
        else:  # a child that keeps only the discordant counts (the truth probes): p and interval from b, c, n
            bb, cc, n = int(s["b"]), int(s["c"]), int(s["n"])
            ck.from_counts["McNemar (b, c, n)"] += 1
        p = 1.0 if bb + cc == 0 else st.binomtest(bb, bb + cc, 0.5).pvalue
        ck.same(where, "McNemar p", float(p), s.get("p_value"))
        ck.same(where, "McNemar difference", (bb - cc) / n, s.get("value"))
        lo, hi = mcnemar_interval(bb, cc, n)
        ck.same(where, "McNemar interval lo", lo, s.get("lo"), 1e-7)
        ck.same(where, "McNemar interval hi", hi, s.get("hi"), 1e-7)
        return
    if test == "permutation" and a and b:  # two independent groups (ids may repeat across stages: index i of each split)
        xa, xb = np.array(list(a["items"].values())), np.array(list(b["items"].values()))
        obs = xa.mean() - xb.mean()
        ck.same(where, "difference of means", float(obs), s.get("value"))
        r = int((s.get("scheme") or {}).get("permutations", 2000))
        # two-sided as |difference| >= |observed| (scipy's "two-sided" doubles the smaller tail instead,
        # which differs where the permutation distribution is lopsided, as with few successes)
        res = st.permutation_test((xa, xb), lambda u, v: abs(np.mean(u) - np.mean(v)), n_resamples=r,
                                  permutation_type="independent", alternative="greater", random_state=rng)
        ck.same(where, "permutation p (Monte Carlo)", float(res.pvalue), s.get("p_value"), mc_tol(res.pvalue, r) + 1 / r)
        return
    if test == "paired bootstrap of the relative PA drops" and tokens and "pa_head" in tokens:
        check_pa_drops(where, s, tokens, ck, rng)
        return
    if test == "jackknife" and tokens and "before" in tokens:
        check_paired_jackknife(where, s, tokens, ck)
        return
    if test.startswith("Kendall tau-b vs step") and tokens and "steps" in tokens:
        check_mui_trend(where, s, tokens, ck)
        return
    if test.startswith("permutation of group labels; jackknife") and tokens and "units" in tokens:
        check_rarefied(where, s, tokens, ck, rng)
        return
    if test == "paired_bootstrap" and paired_items:
        ids = sorted(a["items"])
        d = np.array([a["items"][i] - b["items"][i] for i in ids], float)
        ck.same(where, "mean paired difference", float(d.mean()), s.get("value"))
        r = 2000
        boots = d[rng.integers(0, d.size, (r, d.size))].mean(axis=1)
        p = 1.0 if np.all(d == 0) else max(1 / r, min(1.0, 2 * min(np.mean(boots <= 0), np.mean(boots >= 0))))
        ck.same(where, "paired bootstrap p (Monte Carlo)", float(p), s.get("p_value"), mc_tol(p, r, doubled=True))
        return
    if test.startswith("OLS t-interval of A") and s.get("points"):
        import statsmodels.api as sm

        pts = s["points"]
        x = sm.add_constant(np.log([p["performance"] for p in pts]))
        fit = sm.OLS([p["mui"] for p in pts], x).fit()
        lo, hi = fit.conf_int(0.05)[1]
        ck.same(where, "Utility Law A", float(fit.params[1]), s["value"], 1e-6)
        ck.same(where, "Utility Law A lo", float(lo), s["lo"], 1e-6)
        ck.same(where, "Utility Law A hi", float(hi), s["hi"], 1e-6)
        return
    if test == "cluster_robust_t" and tokens:  # tokens clustered by sequence: statsmodels' CR1, t with G - 1 df
        import statsmodels.api as sm

        y = np.asarray(tokens["value"], float)
        x = sm.add_constant(np.asarray(tokens["correct"], float))
        groups = np.unique(np.asarray(tokens["sequence"]), return_inverse=True)[1]
        fit = sm.OLS(y, x).fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
        lo, hi = fit.conf_int(0.05)[1]
        ck.same(where, "clustered difference", float(fit.params[1]), s["value"], 1e-9)
        ck.same(where, "cluster-robust t p", float(fit.pvalues[1]), s["p_value"], 1e-7)
        ck.same(where, "cluster-robust interval lo", float(lo), s["lo"], 1e-7)
        ck.same(where, "cluster-robust interval hi", float(hi), s["hi"], 1e-7)
        return
    if test == "95% wilson interval" and s.get("n"):  # a share of n with its Wilson interval
        from statsmodels.stats.proportion import proportion_confint

        n = int(s["n"])
        if a and "items" in a:  # each counted item's 0/1 (e.g. each generation error's class)
            x = np.array(list(a["items"].values()), float)
            ck.same(where, "share from items", float(x.mean()), s.get("value"), 1e-12)
            ck.same(where, "share's n from items", x.size, n)
            k = int(x.sum())
        else:
            k = round(s["value"] * n)
            ck.from_counts["Wilson share (value x n)"] += 1
        lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
        ck.same(where, "Wilson interval lo", float(lo), s.get("lo"), 1e-9)
        ck.same(where, "Wilson interval hi", float(hi), s.get("hi"), 1e-9)
        if c.get("p_value") is not None:  # against the claim's boundary: SE = the half-width on its side / z
            v, than = k / n, float(c.get("than") or 0.0)
            half = (v - lo) if v > than else (hi - v)
            p = (1.0 if v == than else 0.0) if half <= 0 else min(1.0, 2 * st.norm.sf(abs(v - than) / (half / st.norm.ppf(0.975))))
            ck.same(where, "interval p against the boundary", float(p), c["p_value"], 1e-9)
        return
    if test.startswith("difference of two independent effects") and s.get("se"):
        ck.from_counts["difference of two effects (each side's value and SE)"] += 1
        ck.same(where, "difference of two effects", s["side_a"] - s["side_b"], s["value"], 1e-12)
        z = abs(s["value"]) / s["se"]
        ck.same(where, "two effects' normal p", float(2 * st.norm.sf(z)), s["p_value"], 1e-9 + 1e-6 * s["p_value"])
        ck.same(where, "two effects' interval lo", s["value"] - st.norm.ppf(0.975) * s["se"], s["lo"], 1e-9)
        ck.same(where, "two effects' interval hi", s["value"] + st.norm.ppf(0.975) * s["se"], s["hi"], 1e-9)
        return
    if test == "95% bootstrap interval" and "pearson" in str(s.get("source")) and a and b:
        ids = sorted(set(a["items"]) & set(b["items"]))
        x, y = np.array([a["items"][i] for i in ids]), np.array([b["items"][i] for i in ids])
        ck.same(where, "Pearson r", float(st.pearsonr(x, y).statistic), s["value"], 1e-9)
        check_percentile_interval(where, "Pearson r's bootstrap interval", x, y,
                                  lambda u, v: st.pearsonr(u, v).statistic, s, ck, rng)
        return
    ck.unrecomputed[test or "no test"] += 1


def check_fisher_z(where: str, s: dict, a: dict, b: dict, ck: Check) -> None:
    """A correlation within strata: scipy's Pearson r in each stratum of at least 4 items whose arms
    vary, Fisher z = atanh(r) averaged with weights n - 3, SE 1 / sqrt(sum(n - 3)), the interval
    tanh(z +- z_0.975 SE)."""
    cells: dict = {}
    for i in a["items"]:
        if i in b["items"] and i in a["strata"]:
            cells.setdefault(a["strata"][i], []).append(i)
    zs, ws = [], []
    for ids in cells.values():
        x, y = np.array([a["items"][i] for i in ids], float), np.array([b["items"][i] for i in ids], float)
        if x.size >= 4 and np.ptp(x) > 0 and np.ptp(y) > 0:
            zs.append(math.atanh(min(max(st.pearsonr(x, y).statistic, -0.999999), 0.999999)))
            ws.append(x.size - 3)
    z = float(np.dot(ws, zs) / sum(ws))
    se = 1 / math.sqrt(sum(ws))
    q = st.norm.ppf(0.975)
    ck.same(where, "Fisher z within strata", math.tanh(z), s["value"], 1e-9)
    ck.same(where, "Fisher z interval lo", math.tanh(z - q * se), s["lo"], 1e-9)
    ck.same(where, "Fisher z interval hi", math.tanh(z + q * se), s["hi"], 1e-9)


def check_within_strata(where: str, s: dict, a: dict, b: dict, ck: Check, rng: np.random.Generator) -> None:
    """A group gap within strata (the arms' ``strata``): the CMH-weighted difference (weights
    n_a n_b / (n_a + n_b)), its SE (the weighted sum of each side's variance of the mean, ddof 1)
    and normal interval, and its within-strata permutation p (Monte Carlo)."""
    cells = []
    for name in sorted(set(a["strata"].values()) | set(b["strata"].values())):
        xa = np.array([v for k, v in a["items"].items() if a["strata"][k] == name], float)
        xb = np.array([v for k, v in b["items"].items() if b["strata"][k] == name], float)
        if xa.size and xb.size:
            cells.append((xa, xb))
    w = np.array([xa.size * xb.size / (xa.size + xb.size) for xa, xb in cells])

    def cmh(parts):
        return float(np.sum(w * np.array([xa.mean() - xb.mean() for xa, xb in parts])) / w.sum())

    obs = cmh(cells)
    ck.same(where, "stratified difference", obs, s["value"])
    if s.get("se") is not None:
        var = sum(wi ** 2 * sum(np.var(x, ddof=1) / x.size if x.size > 1 else 0.0 for x in (xa, xb))
                  for wi, (xa, xb) in zip(w, cells)) / w.sum() ** 2
        se = math.sqrt(var)
        ck.same(where, "stratified SE", se, s["se"], 1e-9)
        ck.same(where, "stratified interval lo", obs - st.norm.ppf(0.975) * se, s["lo"], 1e-9)
        ck.same(where, "stratified interval hi", obs + st.norm.ppf(0.975) * se, s["hi"], 1e-9)
    r = int(s.get("permutations", 2000))
    hits = 0
    for _ in range(r):
        parts = []
        for xa, xb in cells:
            pool = rng.permutation(np.concatenate([xa, xb]))
            parts.append((pool[:xa.size], pool[xa.size:]))
        hits += abs(cmh(parts)) >= abs(obs) - 1e-12
    p = (1 + hits) / (1 + r)
    ck.same(where, "stratified permutation p (Monte Carlo)", p, s["p_value"], mc_tol(p, r))


def check_within_position(where: str, s: dict, tokens: dict, ck: Check, rng: np.random.Generator) -> None:
    """A clustered token statistic within token position: the CMH-weighted difference of correct
    minus wrong tokens over positions holding both, its permutation p (labels shuffled within each
    position, Monte Carlo) and its interval: normal, the SE that of a cluster bootstrap over
    sequences (whole sequences resampled with replacement, resamples where no position holds both
    kinds dropped), recomputed with our own seeded resamples. Tolerance on the SE: five standard
    errors of the difference of two independent bootstrap SDs of R resamples each, sd(SD) ~ SD
    sqrt((kurtosis - 1) / (4 R)) (the large-R variance of a sample SD; kurtosis read off our own
    resamples, never below a normal's 3), i.e. 5 SD sqrt((kurtosis - 1) / (2 R)); on each end z_0.975 times that."""
    v = np.asarray(tokens["value"], float)
    g = np.asarray(tokens["correct"], bool)
    cell = [f"{q}|{b}" for q, b in zip(tokens["position"], tokens.get("length_bin") or [None] * v.size)]
    pos = np.unique(np.asarray(cell), return_inverse=True)[1]  # position, x length bin where the tokens have one
    seq = np.unique(np.asarray(tokens["sequence"]), return_inverse=True)[1]
    size = int(pos.max()) + 1

    def by_position(vals: np.ndarray, labels: np.ndarray, where_: np.ndarray) -> float:
        n1 = np.bincount(where_, labels.astype(float), size)
        n0 = np.bincount(where_, (~labels).astype(float), size)
        both = (n1 > 0) & (n0 > 0)
        if not both.any():
            return float("nan")
        m1 = np.bincount(where_, vals * labels, size)[both] / n1[both]
        m0 = np.bincount(where_, vals * ~labels, size)[both] / n0[both]
        w = n1[both] * n0[both] / (n1[both] + n0[both])
        return float(np.sum(w * (m1 - m0)) / np.sum(w))

    obs = by_position(v, g, pos)
    ck.same(where, "difference within token position", obs, s["value"])
    r = int(s.get("permutations", 2000))
    hits = 0
    for _ in range(r):
        shuffled = g.copy()
        for q in range(size):
            idx = np.flatnonzero(pos == q)
            shuffled[idx] = rng.permutation(g[idx])
        hits += abs(by_position(v, shuffled, pos)) >= abs(obs) - 1e-12
    p = (1 + hits) / (1 + r)
    ck.same(where, "within-position permutation p (Monte Carlo)", p, s["p_value"], mc_tol(p, r))
    if s.get("se") is None:
        return
    members = [np.flatnonzero(seq == k) for k in range(int(seq.max()) + 1)]
    boots = []
    for _ in range(r):
        idx = np.concatenate([members[k] for k in rng.integers(0, len(members), len(members))])
        boots.append(by_position(v[idx], g[idx], pos[idx]))
    boots = np.array(boots)
    boots = boots[np.isfinite(boots)]
    se = float(np.std(boots, ddof=1))
    kurtosis = float(st.kurtosis(boots, fisher=False)) if se > 0 else 3.0
    tol = max(1e-12, 5 * se * math.sqrt(max(kurtosis - 1, 2.0) / (2 * boots.size)))
    z = st.norm.ppf(0.975)
    ck.same(where, "within-position cluster-bootstrap SE (Monte Carlo)", se, s["se"], tol)
    ck.same(where, "within-position interval lo (Monte Carlo)", obs - z * se, s["lo"], z * tol)
    ck.same(where, "within-position interval hi (Monte Carlo)", obs + z * se, s["hi"], z * tol)


def check_pa_drops(where: str, s: dict, obs: dict, ck: Check, rng: np.random.Generator, resamples: int = 2000) -> None:
    """000 sec. 5.4: the baseline's relative PA drop (1 - PA / accuracy) minus the head's, from each
    test item's accuracy and PA (0/1) for both; a paired percentile bootstrap over items (resamples
    with an accuracy of 0 dropped), p twice the smaller tail."""
    x = np.array([obs[c] for c in ("acc_head", "pa_head", "acc_base", "pa_base")], float).T

    def drops(v: np.ndarray) -> float:
        ah, ab = v[:, 0].mean(), v[:, 2].mean()
        return float("nan") if ah == 0 or ab == 0 else v[:, 1].mean() / ah - v[:, 3].mean() / ab

    ck.same(where, "relative PA drops' difference", drops(x), s["value"], 1e-12)
    ck.same(where, "relative PA drops' n", x.shape[0], s["n"])
    boots = np.array([drops(x[i]) for i in rng.integers(0, x.shape[0], (resamples, x.shape[0]))])
    boots = boots[np.isfinite(boots)]
    p = max(1 / resamples, min(1.0, 2 * min(np.mean(boots <= 0), np.mean(boots >= 0))))
    ck.same(where, "relative PA drops' bootstrap p (Monte Carlo)", float(p), s["p_value"], mc_tol(p, resamples, doubled=True))
    for q, key in ((0.025, "lo"), (0.975, "hi")):
        est = float(np.quantile(boots, q))
        m, k = boots.size, q * (boots.size - 1)
        sd_rank = math.sqrt(m * q * (1 - q))
        srt = np.sort(boots)
        se = (srt[min(m - 1, int(k + sd_rank + 1))] - srt[max(0, int(k - sd_rank))]) / 2
        ck.same(where, f"relative PA drops' interval {key} (Monte Carlo)", est, s[key], max(1e-9, 5 * math.sqrt(2) * se))


def check_paired_jackknife(where: str, s: dict, obs: dict, ck: Check) -> None:
    """MUI after minus MUI before on the same responses (MUI: the share of all units in the union of
    the responses' key units), with the paired delete-one jackknife: each response dropped from both
    checkpoints, SE^2 = (n-1)/n sum (d_(i) - mean d)^2, normal interval and two-sided p."""
    total = int(obs["total_units"])
    before = [set(u) for u in obs["before"]]
    after = [set(u) for u in obs["after"]]

    def mui(sets: list[set]) -> float:
        return len(set().union(*sets)) / total

    n = len(before)
    d = mui(after) - mui(before)
    loo = np.array([mui(after[:i] + after[i + 1:]) - mui(before[:i] + before[i + 1:]) for i in range(n)])
    se = float(np.sqrt((n - 1) / n * ((loo - loo.mean()) ** 2).sum()))
    z = st.norm.ppf(0.975)
    ck.same(where, "paired MUI difference", d, s["value"], 1e-12)
    ck.same(where, "paired jackknife interval lo", d - z * se, s["lo"], 1e-9)
    ck.same(where, "paired jackknife interval hi", d + z * se, s["hi"], 1e-9)
    p = (1.0 if d == 0 else 0.0) if se == 0 else float(2 * st.norm.sf(abs(d) / se))
    ck.same(where, "paired jackknife p", p, s["p_value"], 1e-9)


def check_mui_trend(where: str, s: dict, obs: dict, ck: Check) -> None:
    """Kendall's tau-b of MUI against the step over the checkpoints (MUI: the share of all units in
    the union of the items' key units at a checkpoint); p the larger of the exact order p (every
    order of the checkpoints' MUIs, |tau| >= observed) and the delete-one jackknife's normal p (an
    item dropped from every checkpoint at once)."""
    import itertools

    steps, total = np.asarray(obs["steps"], float), int(obs["total_units"])
    sets = [[set(u) for u in per] for per in obs["units"]]

    def mui(per: list[set], drop: int | None = None) -> float:
        return len(set().union(*(u for i, u in enumerate(per) if i != drop))) / total

    def tau(y) -> float:
        t = st.kendalltau(steps, y).statistic
        return 0.0 if np.isnan(t) else float(t)

    y = np.array([mui(per) for per in sets])
    t, n = tau(y), len(sets[0])
    loo = np.array([tau([mui(per, i) for per in sets]) for i in range(n)])
    se = float(np.sqrt((n - 1) / n * ((loo - loo.mean()) ** 2).sum()))
    item_p = (1.0 if t == 0 else 0.0) if se == 0 else float(2 * st.norm.sf(abs(t) / se))
    if len(y) > 8:
        ck.unrecomputed["trend over more than 8 checkpoints (random orders)"] += 1
        return
    order = float(np.mean([abs(tau(y[list(o)])) >= abs(t) - 1e-12 for o in itertools.permutations(range(len(y)))]))
    ck.same(where, "Kendall tau of MUI vs step", t, s["value"], 1e-9)
    ck.same(where, "trend's jackknife SE", se, s["se"], 1e-9)
    ck.same(where, "trend's p (max of order and items)", max(order, item_p), s["p_value"], 1e-9)


def rarefied(flats: list[np.ndarray], r: int, total: int) -> float:
    """Expected share of ``total`` units in the union of r of the samples drawn without replacement:
    sum over units of 1 - C(n - c, r) / C(n, r), c the samples holding the unit (Hurlbert 1971)."""
    from scipy.special import gammaln

    n = len(flats)
    _, c = np.unique(np.concatenate(flats), return_counts=True)
    miss = np.zeros(c.size)
    ok = n - c >= r
    miss[ok] = np.exp(gammaln(n - c[ok] + 1) - gammaln(n - c[ok] - r + 1) - gammaln(n + 1) + gammaln(n - r + 1))
    return float((1 - miss).sum()) / total


def check_rarefied(where: str, s: dict, obs: dict, ck: Check, rng: np.random.Generator) -> None:
    """001 sec. 3.7: rarefied MUI of right vs wrong responses (each response's class; off-format ones
    left out of both groups and of the permutation: rule 6), relative to their mean; the delete-one
    jackknife of the difference (r fixed) over the mean; permutation of the group labels."""
    cls = obs.get("class") or ["right" if c else "wrong" for c in obs["correct"]]  # a report before the class
    keep = [i for i, c in enumerate(cls) if c != "off_format"]
    flats = [np.asarray(obs["units"][i], np.int64) for i in keep]
    good = np.array([cls[i] == "right" for i in keep], bool)
    ck.same(where, "right responses are the correct ones", sum(good), sum(map(bool, obs["correct"])))
    total, r = int(obs["total_units"]), int(s["subset_size"])
    ok, bad = np.flatnonzero(good), np.flatnonzero(~good)
    ck.same(where, "responses compared (right + wrong)", len(keep), s["n"])
    mui = lambda idx: rarefied([flats[i] for i in idx], r, total)  # noqa: E731
    a, b = mui(ok), mui(bad)
    mean = (a + b) / 2
    ck.same(where, "rarefied MUI, correct", a, s["side_a"], 1e-12)
    ck.same(where, "rarefied MUI, incorrect", b, s["side_b"], 1e-12)
    ck.same(where, "relative rarefied MUI difference", (a - b) / mean, s["value"], 1e-9)
    loo = np.array([mui(np.delete(ok, j)) - b for j in range(ok.size)] + [a - mui(np.delete(bad, j)) for j in range(bad.size)])
    se = math.sqrt((loo.size - 1) / loo.size * float(((loo - loo.mean()) ** 2).sum()))
    z = st.norm.ppf(0.975)
    ck.same(where, "jackknife SE / mean", se / mean, s["se"], 1e-9)
    ck.same(where, "jackknife interval lo", (a - b - z * se) / mean, s["lo"], 1e-9)
    ck.same(where, "jackknife interval hi", (a - b + z * se) / mean, s["hi"], 1e-9)
    reps = int((s.get("scheme") or {}).get("permutations", 1000))
    pool = np.arange(len(flats))
    hits = 0
    for _ in range(reps):
        perm = rng.permutation(pool)
        hits += abs(mui(perm[:ok.size]) - mui(perm[ok.size:])) >= abs(a - b) - 1e-12
    p = (1 + hits) / (1 + reps)
    ck.same(where, "rarefied permutation p (Monte Carlo)", p, s["p_value"], mc_tol(p, reps) + 1 / reps)


def check_percentile_interval(where: str, what: str, x: np.ndarray, y: np.ndarray, stat, s: dict, ck: Check,
                              rng: np.random.Generator, resamples: int = 2000) -> None:
    """A percentile bootstrap interval over item pairs (undefined resamples dropped), recomputed with
    ``resamples`` of our own. Tolerance per end: five standard errors of the difference of two
    independent estimates of that quantile, the standard error read off our own resamples as half
    the distance between the order statistics one binomial sd either side of the quantile's rank."""
    boots = np.array([stat(x[i], y[i]) for i in rng.integers(0, x.size, (resamples, x.size))])
    boots = np.sort(boots[np.isfinite(boots)])
    m = boots.size
    for q, key in ((0.025, "lo"), (0.975, "hi")):
        est = float(np.quantile(boots, q))
        k, sd_rank = q * (m - 1), math.sqrt(m * q * (1 - q))
        se = (boots[min(m - 1, int(k + sd_rank + 1))] - boots[max(0, int(k - sd_rank))]) / 2
        ck.same(where, f"{what} {key} (Monte Carlo)", est, s[key], max(1e-9, 5 * math.sqrt(2) * se))


def check_off_format(where: str, c: dict, arms: dict, obs: dict, ck: Check) -> None:
    """004's off-format class: from each question's counts of right, wrong and off-format generations,
    arm a's P(correct) among the answers (right / (right + wrong)), the questions without an answer,
    and the off-format share of the generations with its Wilson interval."""
    off = (c.get("statistic") or {}).get("off_format") or {}
    a = arms.get("a") or {}
    rows = dict(zip(obs["ids"], zip(obs["right"], obs["wrong"], obs["off_format"])))
    answered = {i: r / (r + w) for i, (r, w, _) in rows.items() if r + w}
    for i, v in (a.get("items") or {}).items():
        ck.same(where, "P(correct) among the answers, per question", answered.get(i, float("nan")), v, 1e-12)
    ck.same(where, "questions with an answer", len(answered), len(a.get("items") or {}))
    ck.same(where, "questions without an answer", len(rows) - len(answered), off.get("questions_without_answer"))
    check_share(where, "generations", sum(o for *_, o in rows.values()), sum(sum(t) for t in rows.values()), off, ck)


def check_share(where: str, what: str, k: int, n: int, off: dict, ck: Check) -> None:
    """An off-format block (rule 6): its count ``k`` of ``n`` (responses, generations), its share and
    the share's Wilson interval -- a tested cell's ``statistic.off_format`` and a refused one's alike."""
    from statsmodels.stats.proportion import proportion_confint

    ck.same(where, f"off-format {what}", k, off.get("n"))
    ck.same(where, what, n, off.get("of"))
    ck.same(where, "off-format share", k / n if n else None, off.get("value"), 1e-12)
    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson") if n else (None, None)
    ck.same(where, "off-format Wilson lo", lo if lo is None else float(lo), off.get("lo"), 1e-9)
    ck.same(where, "off-format Wilson hi", hi if hi is None else float(hi), off.get("hi"), 1e-9)


def check_response_classes(where: str, off: dict, obs: dict, arms: dict, ck: Check) -> None:
    """An off-format block rebuilt from each answer's class (``obs``: ids and classes; the classification
    of each text is the child's): 001's responses, a refused 001 cell's alike, and 002's wrong outputs,
    whose arm a must be each answer's (not off-format) 0/1 of the class it counts (``counted``)."""
    counted = obs.get("counted")
    check_share(where, "wrong outputs" if counted else "responses", sum(x == "off_format" for x in obs["class"]),
                len(obs["class"]), off, ck)
    if counted is not None:
        items = (arms.get("a") or {}).get("items") or {}
        want = {i: float(x == counted) for i, x in zip(obs["ids"], obs["class"]) if x != "off_format"}
        ck.same(where, "errors counted (wrong outputs not off-format)", len(want), len(items))
        for i, v in want.items():
            ck.same(where, f"error of class {counted}, per output", v, items.get(i))


def check_refused_share(where: str, c: dict, ev: dict, ck: Check) -> None:
    """A refused or not-tested cell's top-level ``off_format`` (001: a floor, a child that cannot be
    read): from each response's class where its evidence keeps them (``cell.observations``); else (a
    report before them, or a child that keeps no samples) from the block's own count, named apart (no
    tested cell rests on it). A class, count, share or interval changed alone disagrees."""
    obs = (ev.get("cell") or {}).get("observations") or {}
    if "class" in obs:
        check_response_classes(where, c["off_format"], obs, {}, ck)
        return
    off = c["off_format"]
    ck.untested["off-format share of a refused cell"] += 1
    check_share(where, "responses", int(off.get("n", -1)), int(off.get("of", 0)), off, ck)


def check_tost(where: str, c: dict, ck: Check) -> None:
    eq = c.get("equivalence")
    if not eq:
        return
    v, se, m = eq["value"], eq["se"], eq["margin"]
    p = (0.0 if abs(v) < m else 1.0) if se == 0 else max(st.norm.sf((v + m) / se), st.norm.sf((m - v) / se))
    ck.same(where, "TOST p", float(p), eq["p"])


def check_draws(where: str, c: dict, ck: Check) -> None:
    for ctl in c.get("controls") or ():
        rank = ctl.get("rank")
        if not rank:
            continue
        sel = ctl.get("selected", ctl.get("selected_accuracy"))
        draws = ctl.get("draws") if isinstance(ctl.get("draws"), list) else ctl.get("random_accuracy")
        sign = -1 if rank.get("direction") == "less" else 1
        at_least = sum(1 for d in draws if sign * (d - sel) >= 0)
        ck.same(where, f"{ctl['kind']} rank p", (1 + at_least) / (1 + len(draws)), rank["p_value"])


def check_holm(paper: dict, ck: Check) -> None:
    from statsmodels.stats.multitest import multipletests

    families: dict[str, list[dict]] = {}  # one per paper and model variant: the base models, or one trained column
    for c in paper["claims"]:
        if c.get("p_value") is not None and "statistic" in c:
            families.setdefault(c.get("holm_family", ""), []).append(c)
    for tested in families.values():
        adj = multipletests([c["p_value"] for c in tested], method="holm")[1]
        for c, p in zip(tested, adj):
            ck.same(f"{paper['number']} {c['id']} {c['model']}", "Holm p", float(p), c.get("p_holm"))


def recompute(folder: Path, seed: int = 12345) -> Check:
    content, evidence = load(folder)
    ck = Check()
    rng = np.random.default_rng(seed)
    for paper in content["papers"]:
        for c in paper["claims"]:
            where = f"{paper['number']} {c['id']} {c['model']}"
            ev = evidence.get(c.get("evidence_key", ""), {})
            if "statistic" not in c:
                if c.get("off_format"):
                    check_refused_share(where, c, ev, ck)
                continue
            arms = arms_with_items(c, ev)
            check_chance(where, c, arms, ck)
            obs = (ev.get("statistic") or {}).get("observations")
            check_statistic(where, c, arms, ck, rng, obs)
            if obs and "off_format" in obs:
                check_off_format(where, c, arms, obs, ck)
            off = c["statistic"].get("off_format")
            if obs and "class" in obs:
                check_response_classes(where, off or {}, obs, arms, ck)
            elif off and not (obs and "off_format" in obs):  # 002 before its per-output classes: nothing to rebuild
                ck.older["off-format block without per-item classes"] += 1
            check_tost(where, c, ck)
            check_draws(where, c, ck)
        check_holm(paper, ck)
    return ck


def main(argv: list[str]) -> int:
    bad = 0
    for arg in argv or ["."]:
        ck = recompute(Path(arg))
        for line in ck.bad:
            print(line)
        print(f"{arg}: {sum(ck.done.values())} values recomputed ({', '.join(f'{k} {v}' for k, v in sorted(ck.done.items()))}); "
              f"{len(ck.bad)} disagree; from summaries without per-item values: "
              + (", ".join(f"{k} x{v}" for k, v in sorted(ck.from_counts.items())) or "none")
              + "; refused cells, against their own counts: "
              + (", ".join(f"{k} x{v}" for k, v in sorted(ck.untested.items())) or "none")
              + "; side blocks a report wrote before their per-item evidence, unchecked: "
              + (", ".join(f"{k} x{v}" for k, v in sorted(ck.older.items())) or "none")
              + "; not recomputable from the evidence: "
              + (", ".join(f"{k} x{v}" for k, v in sorted(ck.unrecomputed.items())) or "none"))
        bad += len(ck.bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
