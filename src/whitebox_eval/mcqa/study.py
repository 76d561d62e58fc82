"""An MCQA study (000): baseline, select-and-copy heads, lens, PriDe, PA, ablation, cloze.

Passes over the data, each resumable on its own (``arrays/parts/<pass>/``):

- ``main``: every item in its original order; one engine pass per batch feeds the
  baseline, all heads' QK- and Attention-scores and the logit lens (:mod:`scoring`).
  It also streams ``samples.jsonl``.
- ``perm``: every item with its essential options' contents shuffled (seeded), for
  Permutation Accuracy (000 sec. 5.3).
- ``pride``: the estimation items under the cyclic permutations of the essential
  options (uncertainty options stay put), for PriDe (000 eq. 5).
- ``ablate_*``: the test items with the top-k heads of a score zeroed, and with k
  random heads of the same layer band (000 sec. 6, fig. 4).
- ``cloze``: option texts scored as continuations (lm-eval acc / acc_norm).

Under ``torchrun`` every pass is shared among the ranks (:mod:`whitebox_eval.runs.distributed`):
each scores its blocks of batches, all read every part back, and rank 0 alone writes
the merged samples, arrays, plots and results.

The best head is chosen on a validation split (default 5%, never fewer than 50 items
unless asked) and applied to the test split; PriDe estimates its prior on the same
validation items, so every method is reported on the same test items.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Engine, ScaleHeads
from whitebox_eval.mcqa import head_scores as hs
from whitebox_eval.mcqa.items import MCQItem
from whitebox_eval.mcqa.prompts import RenderedPrompt, render_prompt, select_demos, split_demo_pool
from whitebox_eval.mcqa.scoring import continuation_logprobs, score_prompts
from whitebox_eval.mcqa.tokens import TokenizedPrompt, tokenize_prompt
from whitebox_eval.models import LoadedModel, load_model
from whitebox_eval.runs import RunFolder, config_dict, progress
from whitebox_eval.runs.distributed import World, create_run, world as current_world
from whitebox_eval.runs.parts import read_parts, write_part

METHODS = ("baseline", "qk", "attention", "lens", "pride", "pa", "ablation", "cloze")
DEFAULT_METHODS = ("baseline", "qk", "attention", "lens", "pride", "pa")
HEAD_METHODS = ("qk", "attention")


@dataclass
class MCQAConfig:
    """Everything that determines an MCQA study's numbers (written to config.yaml)."""

    model: str = "smollm2-135m"
    task: str = "ssd"
    n_options: int = 4
    labels: str = "letters"
    uncertainty: bool = True
    language: str = "en"
    shots: int = 0
    limit: int | None = 500
    representative: str = "eol"
    methods: tuple[str, ...] = DEFAULT_METHODS
    seed: int = 0
    val_fraction: float = hs.DEFAULT_VAL_FRACTION
    min_val_items: int = hs.DEFAULT_MIN_VAL_ITEMS
    ablation_k: int = 5
    ablation_draws: int = 5
    on_bad_row: str = "skip"
    batch_size: int = 8
    dtype: str = "float32"
    prefix_cache: bool = True
    volatile: tuple[str, ...] = field(default=("batch_size", "prefix_cache"), repr=False)

    def to_dict(self) -> dict:
        return config_dict(self, "mcqa")


def load_items(cfg: MCQAConfig) -> list[MCQItem]:
    """The task's items: ``ssd``, ``arithmetic[:cat,cat]``, or ``NAME=PATH`` for a local file."""
    from whitebox_eval.mcqa.arithmetic import ARITHMETIC_CATEGORIES, make_arithmetic_suite
    from whitebox_eval.mcqa.loaders import LOADERS, load_mcq_dataset
    from whitebox_eval.mcqa.synthetic import make_ssd

    n = cfg.limit if cfg.limit is not None else 2500
    extra = 15 if cfg.shots > 0 else 0  # the demonstration pool comes off the front
    if cfg.task == "ssd":
        return make_ssd(n + extra, cfg.n_options, language=cfg.language, seed=cfg.seed)
    if cfg.task.startswith("arithmetic"):
        cats = tuple(cfg.task.split(":", 1)[1].split(",")) if ":" in cfg.task else ARITHMETIC_CATEGORIES
        per = max(1, -(-(n + extra) // len(cats)))
        return make_arithmetic_suite(per, seed=cfg.seed, categories=cats, n_options=cfg.n_options)[: n + extra]
    if "=" in cfg.task:
        name, path = cfg.task.split("=", 1)
        return list(load_mcq_dataset(name, path, on_bad_row=cfg.on_bad_row, limit=None if cfg.limit is None else n + extra, seed=cfg.seed))
    raise WhiteboxError(
        f"unknown task {cfg.task!r}: use ssd, arithmetic[:add1,mul2], or NAME=PATH with NAME one of {', '.join(sorted(LOADERS))}"
    )


def permutation_order(n: int, rng: random.Random) -> list[int]:
    """A seeded shuffle of the essential options that moves the gold (000 sec. 5.3)."""
    order = list(range(n))
    while order == list(range(n)):
        rng.shuffle(order)
    return order


class _Study:
    """Holds the prompts of one study and runs its passes into the run folder."""

    def __init__(self, cfg: MCQAConfig, folder: RunFolder, loaded: LoadedModel, items: list[MCQItem], demos: list[MCQItem],
                 show_progress: bool | None, world: World = World()):
        self.cfg, self.folder, self.loaded, self.items, self.demos = cfg, folder, loaded, items, demos
        self.engine = Engine(loaded)
        self.world = world
        self.show_progress = show_progress if world.main else False
        self.rendered = [self.render(it) for it in items]
        self.n_max = max(len(r.options) for r in self.rendered)
        self.n_essential = max(len(it.options) for it in items)
        self.split = hs.validation_split(len(items), cfg.val_fraction, cfg.min_val_items, cfg.seed)
        self.prefix = None
        if demos and cfg.prefix_cache:  # the demonstrations are the same for every item: cache them once
            self.prefix = self.engine.prefix(loaded.tokenizer(self.rendered[0].prefix)["input_ids"])

    def render(self, item: MCQItem) -> RenderedPrompt:
        return render_prompt(item, demos=self.demos, labels=self.cfg.labels, uncertainty=self.cfg.uncertainty)

    def tokenize(self, r: RenderedPrompt) -> TokenizedPrompt:
        return tokenize_prompt(self.loaded.tokenizer, r, self.cfg.representative)

    # ---- passes ------------------------------------------------------------------
    def run_pass(self, name: str, prompts: Callable[[int], RenderedPrompt], indices: Sequence[int],
                 scorers: Sequence[str], edits=(), on_batch=None) -> dict[str, np.ndarray]:
        """Score ``prompts(i)`` for every ``i`` in ``indices`` (resumable); return arrays [len(indices), ...]."""
        parts = self.folder.path / "arrays" / "parts" / name
        bs = self.cfg.batch_size
        todo = self._pending(parts, indices, bs)
        for start in progress(range(0, len(todo), bs), total=-(-len(todo) // bs), desc=f"mcqa {name}", enabled=self.show_progress):
            chunk = todo[start:start + bs]
            rendered = [prompts(i) for i in chunk]
            toks = [self.tokenize(r) for r in rendered]
            # edited passes recompute the demonstrations too, so the edit covers the whole prompt
            scores = score_prompts(self.engine, toks, self.n_max, scorers, edits, prefix=None if edits else self.prefix).arrays()
            if on_batch is not None:  # before the part: a batch killed in between is re-run, never lost
                on_batch(chunk, rendered, toks, scores)
            write_part(parts / f"{chunk[0]:08d}.npz", index=np.array(chunk), **scores)
        self.world.barrier()  # every rank's parts are on disk before anyone reads them
        return self._collect(parts, indices)

    def _pending(self, parts: Path, indices: Sequence[int], batch_size: int) -> list[int]:
        """This rank's share of ``indices`` that have no part in ``parts`` yet, in blocks
        of ``batch_size``. Every rank shards rank 0's reading of the parts: read
        independently, a late rank would see parts another has just written."""
        parts.mkdir(parents=True, exist_ok=True)
        done: set[int] = set()
        for _, z in read_parts(parts, self.folder.log if self.world.main else None, set_aside=self.world.main):
            done.update(int(i) for i in z["index"])
        done = self.world.broadcast(done)
        return self.world.shard([i for i in indices if i not in done], block=batch_size)

    @staticmethod
    def _collect(parts: Path, indices: Sequence[int]) -> dict[str, np.ndarray]:
        where = {i: j for j, i in enumerate(indices)}
        out: dict[str, np.ndarray] = {}
        filled: set[int] = set()
        for _, z in read_parts(parts, set_aside=False):
            rows = [where.get(int(i)) for i in z["index"]]
            filled.update(r for r in rows if r is not None)
            for key in z:
                if key == "index":
                    continue
                if key not in out:
                    out[key] = np.full((len(indices), *z[key].shape[1:]), np.nan, dtype=np.float32)
                for src, dst in enumerate(rows):
                    if dst is not None:
                        out[key][dst] = z[key][src]
        if len(filled) < len(where):
            raise WhiteboxError(
                f"{len(where) - len(filled)} of {len(where)} items have no scores in {parts}: under torchrun on several "
                "nodes every node must write to the same run folder (a shared file system); copy the other nodes' "
                "arrays/parts and shards here and rerun the same command with --resume to finish")
        return out

    def main_pass(self) -> dict[str, np.ndarray]:
        scorers = [m for m in ("baseline", "qk", "attention", "lens") if m in self.cfg.methods or m == "baseline"]
        done = self.folder.done_ids()

        def stream(chunk, rendered, toks, scores):
            records = []
            for j, (i, r) in enumerate(zip(chunk, rendered)):
                if self.items[i].id in done:
                    continue
                n = len(r.options)
                letters = scores["letter_logits"][j, :n]
                records.append({"id": self.items[i].id, "gold": r.gold, "n_options": n, "n_tokens": len(toks[j].input_ids),
                                "labels": r.labels, "letter_logits": [round(float(x), 5) for x in letters],
                                "pred_baseline": int(np.argmax(letters))})
            self.folder.append_samples(records)

        arrays = self.run_pass("main", lambda i: self.rendered[i], range(len(self.items)), scorers, on_batch=stream)
        if self.world.main:
            self.folder.merge_shards([it.id for it in self.items])
        return arrays

    def perm_pass(self) -> tuple[dict[str, np.ndarray], list[list[int]]]:
        rng = random.Random(f"pa-{self.cfg.seed}")
        orders = [permutation_order(len(it.options), rng) for it in self.items]
        scorers = [m for m in ("baseline", "qk", "attention") if m in self.cfg.methods or m == "baseline"]
        arrays = self.run_pass("perm", lambda i: self.render(self.items[i].permuted(orders[i])), range(len(self.items)), scorers)
        return arrays, orders

    def pride_pass(self) -> np.ndarray:
        n = self.n_essential
        if any(len(it.options) != n for it in self.items):
            raise WhiteboxError("PriDe needs the same number of options for every item; drop 'pride' from --methods")
        val = list(self.split.val)
        order = lambda p: [(j + p) % n for j in range(n)]
        arrays = self.run_pass("pride", lambda k: self.render(self.items[val[k // n]].permuted(order(k % n))),
                               range(len(val) * n), ["baseline"])
        return arrays["letter_logits"].reshape(len(val), n, self.n_max)

    def ablation_pass(self, name: str, heads: Sequence[tuple[int, int]]) -> np.ndarray:
        by_layer: dict[int, list[int]] = {}
        for layer, head in heads:
            by_layer.setdefault(layer, []).append(head)
        edits = [ScaleHeads(layer, hs_, 0.0) for layer, hs_ in sorted(by_layer.items())]
        test = list(self.split.test)
        return self.run_pass(name, lambda i: self.rendered[i], test, ["baseline"], edits)["letter_logits"]

    def cloze_pass(self) -> tuple[np.ndarray, np.ndarray]:
        """Summed and byte-length-normalised log-likelihood of each option text (lm-eval acc / acc_norm)."""
        tok = self.loaded.tokenizer
        parts = self.folder.path / "arrays" / "parts" / "cloze"
        bs = max(1, self.cfg.batch_size // 2)
        todo = self._pending(parts, range(len(self.items)), bs)
        for start in progress(range(0, len(todo), bs), total=-(-len(todo) // bs), desc="mcqa cloze", enabled=self.show_progress):
            chunk = todo[start:start + bs]
            ctx, cont, owner = [], [], []
            for i in chunk:
                it = self.items[i]
                context = (f"{it.context}\n" if it.context else "") + f"Question: {it.question}\nAnswer:"
                c_ids = tok(context)["input_ids"]
                for o in it.options:
                    full = tok(context + " " + o)["input_ids"]
                    ctx.append(c_ids)
                    cont.append(full[len(c_ids):] if full[: len(c_ids)] == c_ids else tok(" " + o, add_special_tokens=False)["input_ids"])
                    owner.append(i)
            lp = continuation_logprobs(self.engine, ctx, cont)
            ll = np.full((len(chunk), self.n_essential), -np.inf, dtype=np.float32)
            norm = np.full_like(ll, -np.inf)
            k = 0
            for row, i in enumerate(chunk):
                for j, o in enumerate(self.items[i].options):
                    ll[row, j] = lp[k]
                    norm[row, j] = lp[k] / max(1, len((" " + o).encode()))
                    k += 1
            write_part(parts / f"{chunk[0]:08d}.npz", index=np.array(chunk), loglik=ll, loglik_norm=norm)
        self.world.barrier()
        arrays = self._collect(parts, range(len(self.items)))
        return arrays["loglik"], arrays["loglik_norm"]


def _argmax(x: np.ndarray) -> np.ndarray:
    return np.argmax(np.nan_to_num(x, nan=-np.inf), axis=-1)


def _softmax(x: np.ndarray) -> np.ndarray:
    x = np.nan_to_num(x, nan=-np.inf)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def run_mcqa(
    cfg: MCQAConfig,
    output: str | Path = "runs",
    *,
    run_id: str | None = None,
    resume: bool = False,
    loaded: LoadedModel | None = None,
    show_progress: bool | None = None,
) -> RunFolder:
    """Run (or resume) a study and write its run folder; returns the folder."""
    for m in cfg.methods:
        if m not in METHODS:
            raise WhiteboxError(f"unknown method {m!r}; choose from {', '.join(METHODS)}")
    items = load_items(cfg)
    demos: list[MCQItem] = []
    if cfg.shots > 0:
        pool, items = split_demo_pool(items)
        demos = select_demos(pool, cfg.shots, seed=cfg.seed)
    if cfg.limit is not None:
        items = items[: cfg.limit]
    if not items:
        raise WhiteboxError("the task produced no items")
    if len({it.id for it in items}) != len(items):
        raise WhiteboxError("item ids are not unique; every row needs its own id")
    ranks = current_world()
    folder = create_run(ranks, output, cfg.to_dict(), run_id=run_id, resume=resume)
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    study = _Study(cfg, folder, loaded, items, demos, show_progress, ranks)
    folder.log(f"{len(items)} items, model {cfg.model}, methods {','.join(cfg.methods)}"
               + (f", rank {ranks.rank} of {ranks.size}" if ranks.distributed else ""))
    return finalize(study)


def finalize(study: _Study) -> RunFolder:
    """Run the remaining passes, select heads, write results.json, arrays and plots."""
    from whitebox_eval.mcqa import plots
    from whitebox_eval.mcqa.debiasing import pride
    from whitebox_eval.mcqa.metrics import accuracy, per_layer_accuracy, permutation_accuracy, selection_bias

    cfg, folder, items, split = study.cfg, study.folder, study.items, study.split
    writer = study.world.main  # every rank runs the passes; rank 0 alone writes what follows from them
    main = study.main_pass()
    gold = np.array([it.gold for it in items])
    test = split.test
    base_pred = _argmax(main["letter_logits"])
    results: dict = {"n_items": len(items), "n_val": len(split.val), "n_test": len(test), "n_options": study.n_max}
    headline: dict[str, float] = {"acc,baseline": accuracy(base_pred[test], gold[test])}
    results["acc,baseline_all"] = accuracy(base_pred, gold)
    bias = selection_bias(base_pred[test], gold[test], study.n_max)
    results["selection_bias,baseline"] = {"prediction_distribution": bias.prediction_distribution.tolist(),
                                         "recall": bias.recall.tolist(), "recall_std": bias.recall_std}
    dists = {"baseline": bias.prediction_distribution}
    for key, arr in main.items() if writer else ():
        folder.save_array(key, arr)
    selected: dict[str, hs.HeadSelection] = {}
    tables: dict[str, np.ndarray] = {}
    pride_pred, cloze = None, None
    for method in HEAD_METHODS:
        if method not in main:
            continue
        scores = np.where(np.isnan(main[method]), -np.inf, main[method])
        sel = selected[method] = hs.select_best_head(scores, gold, split=split)
        table = tables[method] = hs.head_accuracy(scores, gold)
        results[method] = {"best_head": [sel.layer, sel.head], "val_accuracy": sel.val_accuracy, "test_accuracy": sel.test_accuracy,
                           "oracle_head": list(hs.best_head(table)), "oracle_accuracy": float(table.max())}
        headline[f"acc,{method}_head"] = sel.test_accuracy
        pred = sel.test_predictions
        b = selection_bias(pred, gold[test], study.n_max)
        results[f"selection_bias,{method}_head"] = {"prediction_distribution": b.prediction_distribution.tolist(),
                                                   "recall": b.recall.tolist(), "recall_std": b.recall_std}
        dists[f"{method} head"] = b.prediction_distribution
        if writer:
            folder.save_array(f"{method}_head_accuracy", table)
            plots.plot_head_accuracy_heatmap(table, folder.plot_path(f"{method}_head_accuracy"), best=(sel.layer, sel.head),
                                             title=f"{method}-score accuracy per head ({cfg.model}, {cfg.task})")
    if "attention" in main:
        att = np.where(np.isfinite(main["attention"]), main["attention"], 0.0)
        score = hs.head_score(att[split.val])  # label-free: no gold needed (000 App. I)
        top = hs.rank_heads(score)[:5]
        table = tables["attention"]
        results["head_score"] = {"top": [{"head": [l, h], "head_score": float(score[l, h]), "accuracy": float(table[l, h])} for l, h in top]}
        l0, h0 = top[0]
        headline["acc,head_score_head"] = accuracy(_argmax(main["attention"][test, l0, h0]), gold[test])
        headline["acc,head_score_qk"] = accuracy(_argmax(main["qk"][test, l0, h0]), gold[test]) if "qk" in main else float("nan")
    if "lens" in main:
        curve = per_layer_accuracy(np.where(np.isnan(main["lens"]), -np.inf, main["lens"])[test], gold[test])
        results["lens_accuracy_per_layer"] = [float(x) for x in curve]
        if writer:
            plots.plot_logit_lens_accuracy(np.asarray(curve), folder.plot_path("logit_lens_accuracy"), baseline=headline["acc,baseline"])
    if "pa" in cfg.methods:
        perm, orders = study.perm_pass()
        pgold = np.array([o.index(it.gold) for o, it in zip(orders, items)])
        headline["pa,baseline"] = permutation_accuracy(base_pred[test], gold[test], _argmax(perm["letter_logits"])[test], pgold[test])
        for method, sel in selected.items():
            pp = _argmax(perm[method][test, sel.layer, sel.head])
            headline[f"pa,{method}_head"] = permutation_accuracy(sel.test_predictions, gold[test], pp, pgold[test])
    if "pride" in cfg.methods:
        # PriDe debiases among the essential options: the uncertainty options never move, so
        # their "prior" would only absorb their content (and dividing by it promotes them).
        est = study.pride_pass()
        n = study.n_essential
        res = pride(_softmax(main["letter_logits"][:, :n]), _softmax(est[:, :, :n]), split)
        headline["acc,pride"] = accuracy(res.predictions[test], gold[test])
        pride_pred = res.predictions
        results["pride_prior"] = res.prior.tolist()
        dists["PriDe"] = np.pad(selection_bias(res.predictions[test], gold[test], n).prediction_distribution, (0, study.n_max - n))
    if "ablation" in cfg.methods and "qk" in selected:
        results["ablation"] = ablation_study(study, main, gold)
    if "cloze" in cfg.methods:
        ll, norm = cloze = study.cloze_pass()
        headline["acc,cloze"] = accuracy(_argmax(ll)[test], gold[test])
        headline["acc_norm,cloze"] = accuracy(_argmax(norm)[test], gold[test])
    if writer:
        folder.annotate_samples(_per_item_extras(study, main, selected, pride_pred, cloze))
        plots.plot_prediction_distribution(dists, folder.plot_path("prediction_distribution"),
                                           letters=study.rendered[0].labels if len(study.rendered[0].labels) == study.n_max else None)
        results["headline"] = headline
        folder.save_results(results)
    return folder


def _per_item_extras(study: _Study, main, selected, pride_pred, cloze) -> dict:
    """What samples.jsonl gains once heads are chosen: the best heads' scores and
    predictions, PriDe's prediction and the options' log-likelihoods, per item."""
    extras: dict = {}
    val = set(int(i) for i in study.split.val)
    for i, it in enumerate(study.items):
        n = len(study.rendered[i].options)
        e: dict = {"split": "validation" if i in val else "test"}
        for method, sel in selected.items():
            row = main[method][i, sel.layer, sel.head, :n]
            e[f"{method}_head"] = {"head": [sel.layer, sel.head], "scores": [round(float(x), 5) for x in row],
                                   "pred": int(np.argmax(row))}
        if pride_pred is not None:
            e["pred_pride"] = int(pride_pred[i])
        if cloze is not None:
            e["cloze_loglik"] = [round(float(x), 4) for x in cloze[0][i, : len(it.options)]]
            e["cloze_loglik_norm"] = [round(float(x), 5) for x in cloze[1][i, : len(it.options)]]
        extras[it.id] = e
    return extras


def ablation_study(study: _Study, main: dict[str, np.ndarray], gold: np.ndarray) -> dict:
    """Zero the top-k heads by validation QK accuracy vs k random heads of the same layer band (000 sec. 6)."""
    from whitebox_eval.mcqa.metrics import accuracy

    cfg, split = study.cfg, study.split
    k = cfg.ablation_k
    scores = np.where(np.isnan(main["qk"]), -np.inf, main["qk"])
    val_table = hs.head_accuracy(scores[split.val], gold[split.val])
    top = hs.rank_heads(val_table)[:k]
    lo, hi = min(l for l, _ in top), max(l for l, _ in top)
    band = [(l, h) for l in range(lo, hi + 1) for h in range(study.engine.arch.n_heads) if (l, h) not in top]
    base = accuracy(_argmax(main["letter_logits"][split.test]), gold[split.test])
    out = {"k": k, "top_heads": [list(h) for h in top], "layer_band": [lo, hi], "baseline_accuracy": base}
    out["top_accuracy"] = accuracy(_argmax(study.ablation_pass("ablate_top", top)), gold[split.test])
    rng = random.Random(f"ablation-{cfg.seed}")
    rand = []
    for d in range(cfg.ablation_draws):
        heads = rng.sample(band, min(k, len(band)))
        rand.append(accuracy(_argmax(study.ablation_pass(f"ablate_random{d}", heads)), gold[split.test]))
    out["random_accuracy_mean"] = float(np.mean(rand))
    out["random_accuracies"] = rand
    out["drop_top"] = base - out["top_accuracy"]
    out["drop_random"] = base - out["random_accuracy_mean"]
    return out
