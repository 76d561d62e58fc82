"""An MCQA study (000): baseline, select-and-copy heads, lens, PriDe, PA, ablation, cloze.

Passes over the data, each resumable on its own (``arrays/parts/<pass>/``):

- ``main``: every item in its original order; one engine pass per batch feeds the
  baseline, all heads' QK- and Attention-scores and the logit lens (:mod:`scoring`).
  It also streams ``samples.jsonl``.
- ``perm``: every item with its essential options' contents shuffled (seeded), for
  Permutation Accuracy (000 sec. 5.3).
- ``pride``: the estimation items under the cyclic permutations of the essential
  options (uncertainty options stay put), for PriDe (000 eq. 5).
- ``ablate_*``: the test items with the top-k validation QK heads zeroed, and with k
  random heads of the same layers (000 sec. 6, fig. 4; :mod:`whitebox_eval.mcqa.ablation`).
- ``cloze``: option texts scored as continuations (lm-eval acc / acc_norm).

Under ``torchrun`` every pass is shared among the ranks (:mod:`whitebox_eval.runs.distributed`):
each scores its blocks of batches, all read every part back, and rank 0 alone writes
the merged samples, arrays, plots and results.

The best head is chosen on a validation split (default 5%, never fewer than 50 items
unless asked) and applied to the test split; PriDe estimates its prior, HeadScore ranks
heads and degenerate heads are marked on the same validation items, so every method is
reported on the same test items, each accuracy with its Wilson interval and each method
against the baseline by an exact McNemar test (:mod:`whitebox_eval.stats`). results.json
records the split's ids. Demonstrations come from :mod:`whitebox_eval.tasks.demos`.
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
from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.demos import Demonstrations, plan_demonstrations
from whitebox_eval.tasks.prompts import RenderedPrompt, render_prompt
from whitebox_eval.mcqa.scoring import continuation_logprobs, score_prompts
from whitebox_eval.mcqa.tokens import TokenizedPrompt, tokenize_prompt
from whitebox_eval.models import LoadedModel, load_model
from whitebox_eval.datafiles import recording
from whitebox_eval.runs import RunFolder, config_dict, progress
from whitebox_eval.runs.data_files import data_file_records
from whitebox_eval.runs.lm_eval_format import add_lm_eval_fields, item_accuracy, sample_fields, task_name
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
    from whitebox_eval.tasks.arithmetic import ARITHMETIC_CATEGORIES, make_arithmetic_suite
    from whitebox_eval.tasks import LOADERS, load_mcq_dataset
    from whitebox_eval.tasks.ssd import make_ssd

    from whitebox_eval.tasks.demos import POOL_SIZE, uses_dev_split

    n = cfg.limit if cfg.limit is not None else 2500
    # a held-out demonstration pool comes off the front (not with an MMLU dev split)
    extra = POOL_SIZE if cfg.shots > 0 and not uses_dev_split(cfg.task, cfg.shots) else 0
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

    def __init__(self, cfg: MCQAConfig, folder: RunFolder, loaded: LoadedModel, items: list[MCQItem], demos: Demonstrations,
                 show_progress: bool | None, world: World = World()):
        self.cfg, self.folder, self.loaded, self.items, self.demos = cfg, folder, loaded, items, demos
        self.engine = Engine(loaded)
        self.world = world
        self.show_progress = show_progress if world.main else False
        self.rendered = [self.render(it) for it in items]
        self.n_max = max(len(r.options) for r in self.rendered)
        self.n_essential = max(len(it.options) for it in items)
        self.split = hs.validation_split(len(items), cfg.val_fraction, cfg.min_val_items, cfg.seed)
        self._prefixes: dict[str, object] = {}  # demonstrations text -> its cached key/values

    def render(self, item: MCQItem) -> RenderedPrompt:
        return render_prompt(item, demos=self.demos.for_item(item), labels=self.cfg.labels, uncertainty=self.cfg.uncertainty)

    def prefix_for(self, rendered: Sequence[RenderedPrompt]):
        """The cached demonstrations shared by every prompt of a batch (one cache per subject
        with dev demonstrations), or None (zero-shot, caching off, or mixed subjects)."""
        texts = {r.prefix for r in rendered}
        if not self.cfg.prefix_cache or len(texts) != 1 or not next(iter(texts)):
            return None
        text = texts.pop()
        if text not in self._prefixes:
            self._prefixes[text] = self.engine.prefix(self.loaded.tokenizer(text)["input_ids"])
        return self._prefixes[text]

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
            prefix = None if edits else self.prefix_for(rendered)
            scores = score_prompts(self.engine, toks, self.n_max, scorers, edits, prefix=prefix).arrays()
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
                                "pred_baseline": int(np.argmax(letters)),
                                **sample_fields(self.items[i], r.text, i, r.answer_strings)})
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
    with recording() as read:  # every data file opened, for config.yaml's data_files
        items = load_items(cfg)
        demos, items = plan_demonstrations(cfg.task, cfg.shots, items, cfg.seed, cfg.on_bad_row)
    if cfg.limit is not None:
        items = items[: cfg.limit]
    if not items:
        raise WhiteboxError("the task produced no items")
    if len({it.id for it in items}) != len(items):
        raise WhiteboxError("item ids are not unique; every row needs its own id")
    if set(demos.ids()) & {it.id for it in items}:  # cannot happen by construction; a guard for new sources
        raise WhiteboxError("a demonstration is also an evaluated item; report this as a bug")
    ranks = current_world()
    config = cfg.to_dict()
    config["demonstrations"] = demos.to_config()  # where they came from and their ids
    config["data_files"] = data_file_records(read)  # path, sha256, bytes; --resume refuses changed data
    folder = create_run(ranks, output, config, run_id=run_id, resume=resume)
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    study = _Study(cfg, folder, loaded, items, demos, show_progress, ranks)
    folder.log(f"{len(items)} items, model {cfg.model}, methods {','.join(cfg.methods)}"
               + (f", rank {ranks.rank} of {ranks.size}" if ranks.distributed else ""))
    return finalize(study)


SPLIT_RULE = ("heads (best QK / Attention head, HeadScore head, ablation's key heads), degenerate-head marks and "
              "PriDe's prior are chosen on the validation items; every reported number is on the disjoint test items")


def _correct(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    return (np.asarray(pred) == np.asarray(gold)).astype(np.int64)


def finalize(study: _Study) -> RunFolder:
    """Run the remaining passes, select heads, write results.json, arrays and plots.

    Every headline accuracy gets a Wilson interval and its n (:mod:`whitebox_eval.stats`);
    each method is compared with the baseline on the same test items by an exact McNemar
    test (``results["paired_tests"]``).
    """
    from whitebox_eval import stats
    from whitebox_eval.mcqa import plots
    from whitebox_eval.mcqa.debiasing import pride
    from whitebox_eval.mcqa.metrics import per_layer_accuracy, selection_bias

    cfg, folder, items, split = study.cfg, study.folder, study.items, study.split
    writer = study.world.main  # every rank runs the passes; rank 0 alone writes what follows from them
    main = study.main_pass()
    gold = np.array([it.gold for it in items])
    test = split.test
    predict = lambda x: hs.option_predictions(np.nan_to_num(x, nan=-np.inf), cfg.seed)  # noqa: E731
    base_pred = predict(main["letter_logits"])
    correct: dict[str, np.ndarray] = {"baseline": _correct(base_pred[test], gold[test])}  # per test item
    n_unc = study.n_max - study.n_essential
    results: dict = {
        "n_items": len(items), "n_val": len(split.val), "n_test": len(test), "n_options": study.n_max,
        "n_essential_options": study.n_essential, "chance": 1.0 / study.n_essential,
        "chance_note": f"1 / {study.n_essential} essential options" + (f"; the {n_unc} uncertainty options are never gold" if n_unc else ""),
        "split": {"rule": SPLIT_RULE, "seed": cfg.seed, "val_fraction": cfg.val_fraction, "min_val_items": cfg.min_val_items,
                  "validation_ids": [items[i].id for i in split.val], "test_ids": [items[i].id for i in test]},
        "tie_rule": (f"an item whose top score is shared by several options (relative tolerance {hs.TIE_RTOL:g}) gets a seeded "
                     f"random one of them; a head tied on more than {hs.DEGENERATE_TIE_SHARE:.0%} of the validation items is "
                     "degenerate: listed, never ranked or selected"),
    }
    headline: dict = {}
    stats.add_proportion(headline, "acc,baseline", correct["baseline"])
    stats.add_proportion(results, "acc,baseline_all", _correct(base_pred, gold))
    bias = selection_bias(base_pred[test], gold[test], study.n_max)
    results["selection_bias,baseline"] = {"prediction_distribution": bias.prediction_distribution.tolist(),
                                         "recall": bias.recall.tolist(), "recall_std": bias.recall_std}
    dists = {"baseline": bias.prediction_distribution}
    for key, arr in main.items() if writer else ():
        folder.save_array(key, arr)
    selected: dict[str, hs.HeadSelection] = {}
    pride_pred, cloze = None, None
    for method in HEAD_METHODS:
        if method not in main:
            continue
        scores = np.where(np.isnan(main[method]), -np.inf, main[method])
        sel = selected[method] = hs.select_best_head(scores, gold, split=split, seed=cfg.seed)
        table = hs.head_accuracy(scores, gold, cfg.seed)
        ranked = hs.rank_heads(table, exclude=sel.degenerate)
        degenerate = [[int(l), int(h)] for l, h in zip(*np.nonzero(sel.degenerate))]
        results[method] = {"best_head": [sel.layer, sel.head], "val_accuracy": sel.val_accuracy, "test_accuracy": sel.test_accuracy,
                           "oracle_head": list(ranked[0]), "oracle_accuracy": float(table[ranked[0]]),
                           "oracle_note": "best head on all items, test included: for analysis, never a result",
                           "n_degenerate_heads": len(degenerate), "degenerate_heads": degenerate}
        correct[f"{method}_head"] = sel.test_correct
        stats.add_proportion(headline, f"acc,{method}_head", sel.test_correct)
        b = selection_bias(sel.test_predictions, gold[test], study.n_max)
        results[f"selection_bias,{method}_head"] = {"prediction_distribution": b.prediction_distribution.tolist(),
                                                   "recall": b.recall.tolist(), "recall_std": b.recall_std}
        dists[f"{method} head"] = b.prediction_distribution
        if writer:
            folder.save_array(f"{method}_head_accuracy", table)
            folder.save_array(f"{method}_degenerate_heads", sel.degenerate)
            plots.plot_head_accuracy_heatmap(np.where(sel.degenerate, np.nan, table), folder.plot_path(f"{method}_head_accuracy"),
                                             best=(sel.layer, sel.head),
                                             title=f"{method}-score accuracy per head ({cfg.model}, {cfg.task}; blank = degenerate)")
    if "attention" in main:
        att = np.where(np.isfinite(main["attention"]), main["attention"], 0.0)
        score = hs.head_score(att[split.val], cfg.seed)  # label-free: no gold needed (000 App. I)
        top = hs.rank_heads(score, exclude=selected["attention"].degenerate)[:5]
        table = hs.head_accuracy(att, gold, cfg.seed)
        results["head_score"] = {"top": [{"head": [l, h], "head_score": float(score[l, h]), "accuracy_all_items": float(table[l, h])}
                                         for l, h in top], "selected_on": "validation (label-free)"}
        l0, h0 = top[0]
        correct["head_score_head"] = _correct(predict(main["attention"][:, l0, h0])[test], gold[test])
        stats.add_proportion(headline, "acc,head_score_head", correct["head_score_head"])
        if "qk" in main:
            stats.add_proportion(headline, "acc,head_score_qk", _correct(predict(main["qk"][:, l0, h0])[test], gold[test]))
    if "lens" in main:
        lens = np.where(np.isnan(main["lens"]), -np.inf, main["lens"])[test]
        curve = per_layer_accuracy(lens, gold[test])
        results["lens_accuracy_per_layer"] = [float(x) for x in curve]
        hits = (np.argmax(lens, axis=-1) == gold[test][:, None]).sum(axis=0)
        results["lens_accuracy_per_layer_ci"] = [list(stats.wilson(int(k), len(test))) for k in hits]
        if writer:
            plots.plot_logit_lens_accuracy(np.asarray(curve), folder.plot_path("logit_lens_accuracy"), baseline=headline["acc,baseline"])
    if "pa" in cfg.methods:
        # PA = (1/N) sum I_i I_i^p (000 sec. 5.3): right on the item and on its option-permuted copy
        perm, orders = study.perm_pass()
        pgold = np.array([o.index(it.gold) for o, it in zip(orders, items)])
        stats.add_proportion(headline, "pa,baseline", correct["baseline"] * _correct(predict(perm["letter_logits"])[test], pgold[test]))
        for method, sel in selected.items():
            pp = predict(perm[method][:, sel.layer, sel.head])[test]
            stats.add_proportion(headline, f"pa,{method}_head", sel.test_correct * _correct(pp, pgold[test]))
    if "pride" in cfg.methods:
        # PriDe debiases among the essential options: the uncertainty options never move, so
        # their "prior" would only absorb their content (and dividing by it promotes them).
        est = study.pride_pass()
        n = study.n_essential
        res = pride(_softmax(main["letter_logits"][:, :n]), _softmax(est[:, :, :n]), split)
        pride_pred = res.predictions
        correct["pride"] = _correct(res.predictions[test], gold[test])
        stats.add_proportion(headline, "acc,pride", correct["pride"])
        results["pride_prior"] = res.prior.tolist()
        results["pride_prior_estimated_on"] = "validation items (the same split the heads are chosen on)"
        dists["PriDe"] = np.pad(selection_bias(res.predictions[test], gold[test], n).prediction_distribution, (0, study.n_max - n))
    for name in ("qk_head", "attention_head", "head_score_head", "pride"):
        if name in correct:
            stats.add_paired(results, f"{name}_vs_baseline", stats.mcnemar(correct[name], correct["baseline"]))
    if "ablation" in cfg.methods and "qk" in selected:
        from whitebox_eval.mcqa.ablation import ablation_study

        results["ablation"] = ablation_study(study, main, gold, selected["qk"].degenerate, headline, results)
    if "cloze" in cfg.methods:
        ll, norm = cloze = study.cloze_pass()
        stats.add_proportion(headline, "acc,cloze", _correct(_argmax(ll)[test], gold[test]))
        stats.add_proportion(headline, "acc_norm,cloze", _correct(_argmax(norm)[test], gold[test]))
    if writer:
        folder.annotate_samples(_per_item_extras(study, main, selected, pride_pred, cloze))
        plots.plot_prediction_distribution(dists, folder.plot_path("prediction_distribution"),
                                           letters=study.rendered[0].labels if len(study.rendered[0].labels) == study.n_max else None)
        results["headline"] = headline
        add_lm_eval_fields(results, folder.config, task_name(cfg.task))  # lm-eval's results-file blocks
        folder.save_results(results)
    return folder


def _per_item_extras(study: _Study, main, selected, pride_pred, cloze) -> dict:
    """What samples.jsonl gains once heads are chosen: the best heads' scores (full float
    precision: attention scores can be ~1e-7) and predictions (ties drawn as in the
    accuracies), PriDe's prediction and the options' log-likelihoods, per item."""
    extras: dict = {}
    val = set(int(i) for i in study.split.val)
    base_pred = hs.option_predictions(np.nan_to_num(main["letter_logits"], nan=-np.inf), study.cfg.seed)  # as finalize's
    cloze_pred = (_argmax(cloze[0]), _argmax(cloze[1])) if cloze is not None else None  # as finalize's acc / acc_norm
    for i, it in enumerate(study.items):
        n = len(study.rendered[i].options)
        e: dict = {"split": "validation" if i in val else "test"}
        for method, sel in selected.items():
            row = main[method][i, sel.layer, sel.head, :n]
            e[f"{method}_head"] = {"head": [sel.layer, sel.head], "scores": [float(x) for x in row],
                                   "pred": int(sel.predictions[i]), "tied": bool(hs.tied_items(row[None])[0])}
        if pride_pred is not None:
            e["pred_pride"] = int(pride_pred[i])
        if cloze is not None:
            e["cloze_loglik"] = [float(x) for x in cloze[0][i, : len(it.options)]]
            e["cloze_loglik_norm"] = [float(x) for x in cloze[1][i, : len(it.options)]]
        # per-item 0/1 as lm-eval's samples carry it, from the predictions the headline uses
        e.update(item_accuracy(it.gold, {"baseline": base_pred[i], "pride": e.get("pred_pride"),
                                         **{f"{m}_head": sel.predictions[i] for m, sel in selected.items()},
                                         **({"acc,cloze": cloze_pred[0][i], "acc_norm,cloze": cloze_pred[1][i]} if cloze_pred else {})}))
        extras[it.id] = e
    return extras
