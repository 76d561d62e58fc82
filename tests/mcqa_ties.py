"""Two MCQA run folders of one study whose float32 kernels differ (torchrun ranks against one
process): equal, except where a near tie in the scores lets an argmax flip.

The scores every prediction is an argmax of (the main, permuted and PriDe passes' letter
logits, QK- and Attention-scores, read from each pass's parts) are asserted equal to
``drift``: ``TOL + TOL * |x|``, attention ``ATT_RTOL * x``. A prediction is *unstable* when
another option's score can reach the top one within those drifts of the first run's scores
(plus the study's tie band, ``TIE_RTOL`` of the top: a tied item gets a seeded draw); PriDe's
debiased scores carry the drift through the log-softmax and the prior (``_pride_unstable``).
No assumption about any CPU's kernels is left: whatever the second run's scores are within
the asserted drifts, its argmaxes differ only on unstable items.

Everything built from predictions is compared exactly where none of its items is unstable,
and else within what they allow: a prediction or 0/1 only on its unstable items; an accuracy
by k/n and a Wilson interval's ends by 2k/n (k unstable of n items; its stderr left out), a
prediction share by k/n (the recalls left out); a McNemar test's discordant counts by the two
methods' k (its p-value and interval left out); a head's
count by its unstable items; the best / oracle head only to a head whose count can reach the
chosen one's; a degenerate mark only where the head's tie count can cross the share; HeadScore's
values within each head's range (mass to ATT_RTOL, share of items off the modal pick to its
unstable items) and its order only where those ranges overlap. A head method whose chosen
head did move leaves that head's own numbers uncompared (they are another head's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from float_tolerance import assert_tree_close

from whitebox_eval.mcqa import head_scores as hs

# Each rank pads its own batches (and runs 1 thread against the single process's 2), so the
# float32 kernels see other shapes: a logit moves by ~1e-6 of its size, and a log-likelihood
# summed over a continuation's tokens by ~1e-5 of its size (2.5e-4 on a -16.4 cloze score was
# seen on CI). Relative 1e-4 leaves 10x room; absolute 1e-4 covers values near zero.
TOL = 1e-4
# Attention-scores are softmax weights, 1e-21 to 0.7: an absolute 1e-4 says nothing about them.
# A weight moves by the drift of its logit minus log Z, under 1e-6 x 50 = 5e-5 of itself
# (|logit| < 50); relative 1e-3 leaves 20x room.
ATT_RTOL = 1e-3
PASSES = ("main", "perm", "pride")
SCORES = ("letter_logits", "qk", "attention")


def drift(name: str, x: np.ndarray) -> np.ndarray:
    """How far each entry of array ``name`` may move between the runs (what is asserted)."""
    x = np.abs(np.nan_to_num(np.asarray(x, dtype=np.float64), nan=0.0, neginf=0.0, posinf=0.0))
    return ATT_RTOL * x if name == "attention" else TOL + TOL * x


def unstable(scores: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Rows (last axis: options) whose argmax or tie can change when each score moves by ``d``."""
    x = np.where(np.isnan(scores), -np.inf, np.asarray(scores, dtype=np.float64))
    top = np.argmax(x, axis=-1)[..., None]
    x_top, d_top = np.take_along_axis(x, top, -1), np.take_along_axis(d, top, -1)
    others = np.arange(x.shape[-1]) != top
    with np.errstate(invalid="ignore"):
        reach = (x_top - x) <= d_top + d + 2 * hs.TIE_RTOL * np.abs(x_top)
    return (reach & others).any(axis=-1)


@dataclass
class Run:
    """What a run folder holds that the comparison reads."""

    results: dict
    samples: list[dict]
    passes: dict[str, dict[str, np.ndarray]]  # pass -> array name -> [items, ...] in item order
    tables: dict[str, np.ndarray] = field(default_factory=dict)  # arrays/<name>.npy: head tables


def _parts(folder: Path, name: str) -> dict[str, np.ndarray]:
    rows: dict[int, dict] = {}
    for f in sorted((folder / "arrays" / "parts" / name).glob("*.npz")):
        with np.load(f) as z:
            for j, i in enumerate(z["index"]):
                rows[int(i)] = {k: z[k][j] for k in z.files if k in SCORES}
    keys = [k for k in SCORES if rows and k in rows[min(rows)]]
    return {k: np.stack([rows[i][k] for i in sorted(rows)]).astype(np.float64) for k in keys}


def load_run(folder: Path, results: dict, samples: list[dict]) -> Run:
    tables = {p.stem: np.load(p) for p in (folder / "arrays").glob("*_head*.npy")}
    return Run(results, samples, {name: _parts(folder, name) for name in PASSES}, tables)


def assert_arrays_close(one: Run, two: Run) -> None:
    """Every pass's score arrays equal within the asserted drifts (TOL; attention also ATT_RTOL)."""
    for name, arrays in one.passes.items():
        assert arrays.keys() == two.passes[name].keys(), name
        for key, a in arrays.items():
            b = two.passes[name][key]
            np.testing.assert_allclose(b, a, atol=TOL, rtol=TOL, equal_nan=True, err_msg=f"{name}/{key}")
            if key == "attention":
                np.testing.assert_allclose(b, a, atol=0, rtol=ATT_RTOL, equal_nan=True, err_msg=f"{name}/{key}")


class _Study:
    """The first run's split, gold, unstable items and predictions (the study's own rules)."""

    def __init__(self, one: Run):
        ids = [s["id"] for s in one.samples]
        split = one.results["split"]
        self.n, self.seed = len(ids), split["seed"]
        self.val = np.array([ids.index(i) for i in split["validation_ids"]], dtype=int)
        self.test = np.array([ids.index(i) for i in split["test_ids"]], dtype=int)
        self.gold = np.array([s["gold"] for s in one.samples])
        self.u = {(p, k): unstable(a, drift(k, a)) for p, arr in one.passes.items() for k, a in arr.items()
                  if k in SCORES and p != "pride"}
        self.scores = {k: np.where(np.isnan(a), -np.inf, a) for k, a in one.passes.get("main", {}).items()}
        if "pride_prior" in one.results:
            self.u[("pride", "pred")] = self._pride_unstable(one)

    def _pride_unstable(self, one: Run) -> np.ndarray:
        """PriDe's prediction per item (000 eq. 5): a test item's ``log P_obs - log prior``, a
        validation item's mean ``log P`` of each content over the cyclic shifts of the PriDe pass.
        A log-softmax moves by at most 2x its row's largest logit drift ``dl``; the prior, a mean
        of per-item softmaxes of such means, moves by at most 4x the PriDe rows' ``dl`` in log;
        1e-6 more for the study's float32 softmax."""
        prior = np.asarray(one.results["pride_prior"], dtype=np.float64)
        n = len(prior)
        rows = one.passes["pride"]["letter_logits"][:, :n]
        lp = rows - np.logaddexp.reduce(rows, axis=-1, keepdims=True)
        dr = 2 * drift("letter_logits", rows).max(-1)
        letters = self.scores["letter_logits"][:, :n]
        logp = letters - np.logaddexp.reduce(letters, axis=-1, keepdims=True)
        d = 2 * drift("letter_logits", letters).max(-1, keepdims=True) + 2 * dr.max() + 1e-6
        out = unstable(logp - np.log(prior), np.broadcast_to(d, logp.shape))
        for e, i in enumerate(self.val):  # rows: validation items in order, shifts 0..n-1 (content (j+p)%n at j)
            block = lp[e * n:(e + 1) * n]
            mean = np.array([np.mean([block[p, (k - p) % n] for p in range(n)]) for k in range(n)])
            out[i] = unstable(mean, np.full(n, dr[e * n:(e + 1) * n].max() + 1e-6))
        return out

    def correct(self, method: str) -> np.ndarray:
        return hs.option_predictions(self.scores[method], self.seed) == self.gold[:, None, None]

    def reachable(self, method: str, items: np.ndarray, chosen: tuple[int, int], degenerate: np.ndarray) -> np.ndarray:
        """Heads that can take ``chosen``'s place by their counts on ``items`` (within their unstable items)."""
        c = self.correct(method)[items].sum(0)
        k = self.u[("main", method)][items].sum(0)
        low = c[chosen] - k[chosen]
        order = np.arange(c.size).reshape(c.shape) < np.ravel_multi_index(chosen, c.shape)  # lower layer, head first
        can = (c + k > low) | ((c + k == low) & order)
        can[chosen] = False
        return can & ~degenerate


class _Limits:
    """What each reported quantity may differ by: (k unstable items, n items) per method."""

    def __init__(self, one: Run, two: Run, st: _Study):
        u, r = st.u, one.results
        self.n, self.u_all = st.n, {m: u[("main", m)] for m in ("qk", "attention") if ("main", m) in u}
        self.att_table = one.tables.get("attention_head_accuracy")
        base, pbase = u.get(("main", "letter_logits")), u.get(("perm", "letter_logits"))
        self.k: dict[str, tuple[int, int] | None] = {}
        self.moved: dict[str, bool] = {}
        if base is not None:
            self.k["acc,baseline"] = (int(base.sum()), st.n)
            self.k["acc,baseline_test"] = (int(base[st.test].sum()), len(st.test))
            if pbase is not None:
                self.k["pa,baseline"] = (int((base | pbase).sum()), st.n)
        self.changeable: dict[str, np.ndarray] = {}
        for m in ("qk", "attention"):
            if m not in r:
                continue
            h = tuple(r[m]["best_head"])
            tied = hs.tied_items(st.scores[m][st.val]).sum(0)
            kv = u[("main", m)][st.val].sum(0)
            self.changeable[m] = np.abs(tied - hs.DEGENERATE_TIE_SHARE * len(st.val)) <= kv
            degenerate = one.tables[f"{m}_degenerate_heads"] & ~self.changeable[m]
            for key, items in (("best_head", st.val), ("oracle_head", np.arange(st.n))):
                h1, h2 = tuple(r[m][key]), tuple(two.results[m][key])
                self.moved[f"{m}.{key}"] = h1 != h2
                assert h1 == h2 or st.reachable(m, items, h1, degenerate)[h2], \
                    f"{m}.{key}: {list(h2)} in place of {list(h1)}, whose count it cannot reach by near ties"
            self.moved[m] = self.moved[f"{m}.best_head"]
            um = u[("main", m)][:, h[0], h[1]]
            self.k[f"acc,{m}_head"] = None if self.moved[m] else (int(um[st.test].sum()), len(st.test))
            self.k[f"val,{m}_head"] = None if self.moved[m] else (int(um[st.val].sum()), len(st.val))
            if ("perm", m) in u:
                up = um | u[("perm", m)][:, h[0], h[1]]
                self.k[f"pa,{m}_head"] = None if self.moved[m] else (int(up[st.test].sum()), len(st.test))
        if "head_score" in r:
            self.score_range = self._head_score_range(one, st)
            l0, h0 = r["head_score"]["top"][0]["head"]
            self.moved["head_score"] = [l0, h0] != two.results["head_score"]["top"][0]["head"]
            for name, m in (("head_score_head", "attention"), ("head_score_qk", "qk")):
                if ("main", m) in u:
                    k = int(u[("main", m)][st.test, l0, h0].sum())
                    self.k[f"acc,{name}"] = None if self.moved["head_score"] else (k, len(st.test))
        if ("pride", "pred") in u:
            self.k["acc,pride"] = (int(u[("pride", "pred")][st.test].sum()), len(st.test))

    def _head_score_range(self, one: Run, st: _Study) -> tuple[np.ndarray, np.ndarray]:
        """Where each head's HeadScore (000 App. I, mass x share of items off the modal pick, on the
        validation items) can lie in the second run: the mass within ATT_RTOL, the share within
        the head's unstable validation items / n; a degenerate head that cannot change is out."""
        att = one.passes["main"]["attention"][st.val]
        mass = np.where(np.isfinite(att), att, 0.0).sum(-1).mean(0)
        share = hs.head_score(np.where(np.isfinite(att), att, 0.0), st.seed) / np.where(mass > 0, mass, 1.0)
        k = st.u[("main", "attention")][st.val].sum(0) / len(st.val)
        lo, hi = mass * (1 - ATT_RTOL) * np.maximum(share - k, 0), mass * (1 + ATT_RTOL) * np.minimum(share + k, 1)
        out = one.tables["attention_degenerate_heads"] & ~self.changeable["attention"]
        return np.where(out, -np.inf, lo), np.where(out, -np.inf, hi)

    def of(self, key: str) -> tuple[int, int] | None:
        """(k, n) of a metric key such as ``acc_ci,qk_head`` or ``pa,baseline`` (k = 0: exact)."""
        metric, _, method = key.partition(",")
        family = "pa" if metric.startswith("pa") else "acc"
        return self.k.get(f"{family},{method}", (0, 1))


def close(a, b, path="") -> None:
    """Equal structures; floats equal to ``TOL`` (relative and absolute)."""
    assert_tree_close(a, b, TOL, TOL, path)


def _within(a, b, bound: float, path: str) -> None:
    """Numbers (or equal-length lists of them) apart by at most ``bound`` (+ float rounding)."""
    if isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _within(x, y, bound, f"{path}[{i}]")
    else:
        assert abs(a - b) <= bound + 1e-9, f"{path}: {a} and {b} differ by more than {bound} (near ties)"


def _metric(key: str, a, b, lim: tuple[int, int] | None, path: str) -> None:
    """A headline / lm-eval metric ``acc,<method>``, ``acc_ci,<method>``, ...: exact at k = 0."""
    if lim is not None and lim[0] == 0:
        return close(a, b, path)
    stat = key.partition(",")[0].removeprefix("pa").removeprefix("acc")
    if stat in ("_n", "_ci_method"):
        return close(a, b, path)
    if lim is None:  # the best head itself may change: nothing of it is comparable
        return None
    k, n = lim
    if stat in ("", "_ci"):
        _within(a, b, (2 if stat else 1) * k / n, path)  # a Wilson end moves by < 2/n per item


def _metrics(a: dict, b: dict, lim: _Limits, path: str) -> None:
    assert a.keys() == b.keys(), path
    for m in a:
        if "," in m:
            _metric(m, a[m], b[m], lim.of(m), f"{path}.{m}")
        else:  # sample_count (n per metric), alias, name, ...
            close(a[m], b[m], f"{path}.{m}")


def compare_results(one: dict, two: dict, lim: _Limits) -> None:
    """results.json of the two runs: exact, or within the near ties of what each value is built from."""
    assert one.keys() == two.keys()
    for key in one:
        a, b, path = one[key], two[key], f".{key}"
        if key == "headline":
            _metrics(a, b, lim, path)
        elif key == "results":  # lm-eval's block: per task, the same metrics and their sample_count
            assert a.keys() == b.keys(), path
            for task in a:
                _metrics(a[task], b[task], lim, f"{path}.{task}")
        elif key.startswith("selection_bias,"):
            k = lim.of("acc," + key.partition(",")[2])
            if k is not None and k[0] == 0:
                close(a, b, path)
            elif k is not None:  # a flipped item moves 1/n between two options
                _within(a["prediction_distribution"], b["prediction_distribution"], k[0] / k[1], path)
        elif key == "paired_tests":
            for test, pa in a.items():
                pb, method = b[test], test.removesuffix("_vs_baseline")
                km, kb = lim.of("acc," + method), lim.of("acc,baseline_test")
                if km is None or kb is None:
                    continue
                k = km[0] + kb[0]
                if k == 0:
                    close(pa, pb, f"{path}.{test}")
                else:  # discordant counts move by one per flipped item; p-values and intervals are left out
                    _within([pa["b"], pa["c"], pa["diff"] * pa["n"]], [pb["b"], pb["c"], pb["diff"] * pb["n"]], k, path)
        elif key in ("qk", "attention"):
            _head_section(key, a, b, lim, path)
        elif key == "explorer":  # heads chosen from the best and oracle heads and HeadScore's
            if not any(lim.moved.values()):
                close(a, b, path)
        elif key == "head_score":
            _head_score(a, b, lim, path)
        else:
            close(a, b, path)


def _head_section(m: str, a: dict, b: dict, lim: _Limits, path: str) -> None:
    """results[m]: best head, its accuracies, the oracle head and the degenerate heads."""
    rest = {k for k in a if k not in ("best_head", "val_accuracy", "test_accuracy", "oracle_head", "oracle_accuracy",
                                      "degenerate_heads", "n_degenerate_heads")}
    close({k: a[k] for k in rest}, {k: b[k] for k in rest}, path)
    if not lim.moved[m]:  # (a moved head was checked against the near ties in _Limits)
        for key, name in (("val_accuracy", "val"), ("test_accuracy", "acc")):
            k, n = lim.k[f"{name},{m}_head"]
            (close if k == 0 else lambda x, y, p: _within(x, y, k / n, p))(a[key], b[key], f"{path}.{key}")
    if not lim.moved[f"{m}.oracle_head"]:
        k = int(lim.u_all[m][:, a["oracle_head"][0], a["oracle_head"][1]].sum())
        _within(a["oracle_accuracy"], b["oracle_accuracy"], k / lim.n, f"{path}.oracle_accuracy")
    changeable = lim.changeable[m]
    diff = {tuple(h) for h in a["degenerate_heads"]} ^ {tuple(h) for h in b["degenerate_heads"]}
    assert all(changeable[h] for h in diff), f"{path}.degenerate_heads: {sorted(diff)} changed with no near tie"
    if not diff:
        assert a["n_degenerate_heads"] == b["n_degenerate_heads"]


def _head_score(a: dict, b: dict, lim: _Limits, path: str) -> None:
    """HeadScore's top heads: each value within its head's range, a head at rank j only if
    fewer than j + 1 heads surely score above it; each head's accuracy over all items within
    its unstable items of the first run's."""
    lo, hi = lim.score_range
    close(a["selected_on"], b["selected_on"], path)
    assert len(a["top"]) == len(b["top"]), path
    for j, t in enumerate(b["top"]):
        h = tuple(t["head"])
        assert lo[h] - TOL <= t["head_score"] <= hi[h] + TOL, f"{path}.top[{j}]: {t['head_score']} outside {lo[h]}..{hi[h]}"
        above = int((lo > hi[h]).sum())
        assert above <= j, f"{path}.top[{j}]: head {list(h)} ranked {j}, but {above} heads surely score above it"
        k = int(lim.u_all["attention"][:, h[0], h[1]].sum())
        _within(lim.att_table[h], t["accuracy_all_items"], k / lim.n, f"{path}.top[{j}].accuracy_all_items")

def compare_samples(one: list[dict], two: list[dict], st: _Study, lim: _Limits, results: dict) -> None:
    """samples.jsonl item by item: a prediction (and its 0/1) may differ only on its unstable items."""
    assert [s["id"] for s in two] == [s["id"] for s in one]  # merged in example order
    u = st.u
    free: dict[str, np.ndarray] = {}  # field -> items where it may differ
    if ("main", "letter_logits") in u:
        free["pred_baseline"] = free["acc,baseline"] = u[("main", "letter_logits")]
        if ("perm", "letter_logits") in u:
            free["pa,baseline"] = u[("main", "letter_logits")] | u[("perm", "letter_logits")]
    if ("pride", "pred") in u:
        free["pred_pride"] = free["acc,pride"] = u[("pride", "pred")]
    heads = {m: tuple(results[m]["best_head"]) for m in ("qk", "attention") if m in results}
    for m, (l, h) in heads.items():
        every = np.full(st.n, lim.moved[m])
        free[f"{m}_head"] = free[f"acc,{m}_head"] = every | u[("main", m)][:, l, h]
        if ("perm", m) in u:
            free[f"pa,{m}_head"] = free[f"{m}_head"] | u[("perm", m)][:, l, h]
    for i, (a, b) in enumerate(zip(one, two)):
        assert a.keys() == b.keys(), a["id"]
        for key in a:
            path = f"{a['id']}.{key}"
            if key in {f"{m}_head" for m in heads}:
                m = key.removesuffix("_head")
                if lim.moved[m]:
                    continue  # another head may be chosen: its scores and predictions are another head's
                close({k: a[key][k] for k in ("head", "scores")}, {k: b[key][k] for k in ("head", "scores")}, path)
                if not free[key][i]:
                    close(a[key], b[key], path)
            elif key in free:
                if not free[key][i]:
                    close(a[key], b[key], path)
            else:
                close(a[key], b[key], path)


def compare_tables(one: Run, two: Run, st: _Study, lim: _Limits) -> None:
    """arrays/<m>_head_accuracy.npy: each head's count within its unstable items;
    arrays/<m>_degenerate_heads.npy: a head's mark changes only where its tie count can cross the share."""
    assert one.tables.keys() == two.tables.keys()
    for m, changeable in lim.changeable.items():
        counts = [np.rint(r.tables[f"{m}_head_accuracy"] * st.n).astype(int) for r in (one, two)]
        k = st.u[("main", m)].sum(0)
        over = np.abs(counts[1] - counts[0]) > k
        assert not over.any(), f"{m}_head_accuracy: heads {np.argwhere(over).tolist()} moved past their near ties"
        moved = one.tables[f"{m}_degenerate_heads"] != two.tables[f"{m}_degenerate_heads"]
        assert not (moved & ~changeable).any(), f"{m}_degenerate_heads: {np.argwhere(moved & ~changeable).tolist()}"


def compare_runs(one: Run, two: Run) -> _Limits:
    """Everything the two runs wrote, as the module docstring says; returns the limits used."""
    assert_arrays_close(one, two)
    st = _Study(one)
    lim = _Limits(one, two, st)
    compare_results(one.results, two.results, lim)
    compare_samples(one.samples, two.samples, st, lim, one.results)
    compare_tables(one, two, st, lim)
    return lim
