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
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Engine, ScaleHeads
from whitebox_eval.sae import feature_edits
from whitebox_eval.internals.edit_coverage import counted, edit_coverage
from whitebox_eval.internals.packing import packed_length
from whitebox_eval.internals.prefixes import MIN_UNMARKED_TOKENS, PrefixCache, batch_order
from whitebox_eval.mcqa import head_scores as hs
from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.demos import POOL_SIZE, Demonstrations, demo_source, plan_demonstrations
from whitebox_eval.tasks import lm_eval
from whitebox_eval.tasks.loading import load_mcq
from whitebox_eval.tasks.prompts import RenderedPrompt
from whitebox_eval.mcqa.chat import RULE as CHAT_RULE
from whitebox_eval.mcqa.prompt_writer import PromptWriter
from whitebox_eval.mcqa.scoring import continuation_logprobs, score_prompts
from whitebox_eval.models import LoadedModel, load_model
from whitebox_eval.datafiles import recording
from whitebox_eval.runs import RunFolder, open_run
from whitebox_eval.runs.lm_eval_format import sample_fields
from whitebox_eval.runs.distributed import World, world as current_world
from whitebox_eval.runs.passes import run_pass
from whitebox_eval.runs.limits import offered, taken
from whitebox_eval.runs.pass_plan import plan_passes
from whitebox_eval.mcqa.pass_plan import pass_plan
from whitebox_eval.mcqa.config import LETTER_METHODS, SELECTING_METHODS, SYNTHETIC_DEFAULT_LIMIT, VIEW_RULES, MCQAConfig
from whitebox_eval.mcqa.finalize import finalize
from whitebox_eval.mcqa.activations import Saver, check as check_saved

def load_items(cfg: MCQAConfig) -> list[MCQItem]:
    """The task's items: ``ssd``, ``arithmetic[:cat,cat]``, or ``NAME=PATH`` for a local file.

    A file gives all its items (``--limit`` is applied after the demonstration pool is
    set aside, so the summary can say how many of how many were evaluated); a synthetic
    task generates ``limit`` items (``SYNTHETIC_DEFAULT_LIMIT`` without one) plus the pool."""
    if cfg.spec.is_lm_eval:
        return _lm_eval_items(cfg)[0]
    n = taken(cfg.limit, SYNTHETIC_DEFAULT_LIMIT)  # a fraction: of the default count
    # a held-out demonstration pool comes off the front (not with a dev/train split or --demos-from)
    extra = POOL_SIZE if demo_source(cfg.spec, cfg.shots, cfg.demos_source).takes_pool else 0
    return load_mcq(cfg.spec, n + extra, seed=cfg.seed, n_options=cfg.n_options, language=cfg.language,
                    on_bad_row=cfg.on_bad_row)


def permutation_order(n: int, rng: random.Random) -> list[int]:
    """A seeded shuffle of the essential options that moves the gold (000 sec. 5.3)."""
    order = list(range(n))
    while order == list(range(n)):
        rng.shuffle(order)
    return order


class _Study:
    """Holds the prompts of one study and runs its passes into the run folder."""

    def __init__(self, cfg: MCQAConfig, folder: RunFolder, loaded: LoadedModel, items: list[MCQItem],
                 prompts: PromptWriter, user_edits: list, show_progress: bool | None, world: World = World()):
        self.cfg, self.folder, self.loaded, self.items, self.prompts = cfg, folder, loaded, items, prompts
        self.engine = Engine(loaded)
        self.user_edits = user_edits  # --edit: every pass
        self.world = world
        self.show_progress = show_progress if world.main else False
        self.reports_acc_norm = cfg.prompt != lm_eval.LM_EVAL or "acc_norm" in (
            items[0].meta["lm_eval_metrics"] if "lm_eval_metrics" in items[0].meta else lm_eval.doc(cfg.spec.record, items[0]).metrics)
        self.letters = any(m in LETTER_METHODS for m in cfg.methods)  # the main pass runs
        self.rendered = [prompts.render(it) for it in items] if self.letters else []
        self.n_essential = max(len(it.options) for it in items)
        self.n_max = max(len(r.options) for r in self.rendered) if self.rendered else self.n_essential
        if any(m in SELECTING_METHODS for m in cfg.methods):
            self.split = hs.validation_split(len(items), cfg.val_fraction, cfg.min_val_items, cfg.seed)
        else:  # nothing is selected: every item is reported
            self.split = hs.Split(val=np.arange(0), test=np.arange(len(items)))
        self._prefixes = PrefixCache(self.engine)  # the demonstrations' key/values, found on tokens
        self.saver = Saver(self) if cfg.save_activations else None  # --save-activations (mcqa/activations.py)

    def prefix_for(self, ids: Sequence[Sequence[int]], limit: int, min_tokens: int | None = None):
        """The cached key/values of the tokens every sequence of a batch starts with, at most
        ``limit`` of them (:mod:`whitebox_eval.internals.prefixes`), or None (caching off,
        nothing shared, a sliding window too short)."""
        return self._prefixes.for_batch(ids, limit=limit, min_tokens=min_tokens) if self.cfg.prefix_cache else None

    # ---- passes ------------------------------------------------------------------
    def run_pass(self, name: str, prompt_of: Callable[[int], RenderedPrompt], indices: Sequence[int],
                 scorers: Sequence[str], edits=(), records=None, save: bool = False) -> dict[str, np.ndarray]:
        """Score ``prompt_of(i)`` for every ``i`` in ``indices`` (resumable, :mod:`whitebox_eval.runs.passes`);
        return arrays [len(indices), ...]. ``records(chunk, rendered, toks, scores)`` gives the
        batch's sample records (None: the pass writes no samples); ``save``: the pass's batches
        also write ``--save-activations``' parts."""
        indices = list(indices)
        edits = [*self.user_edits, *edits]
        saver = self.saver if save else None

        def score(batch: list[int]):
            chunk = [indices[b] for b in batch]
            rendered = [prompt_of(i) for i in chunk]
            toks = [self.prompts.tokenize(r) for r in rendered]
            # edited passes recompute the demonstrations too, so the edit covers the whole prompt
            prefix = None if edits else self.prefix_for([t.input_ids for t in toks], min(t.prefix_tokens for t in toks))
            scores = score_prompts(self.engine, toks, self.n_max, scorers, edits, prefix=prefix,
                                   extra=saver.captures(toks) if saver else (),
                                   on_trace=(lambda tr, used: saver.write(chunk, toks, tr, used)) if saver else None).arrays()
            return (records(chunk, rendered, toks, scores) if records else None), scores

        ids = [self.items[i].id for i in indices] if records else list(range(len(indices)))
        return run_pass(self.folder, name, ids, self.cfg.batch_size, score, world=self.world,
                        desc=f"mcqa {name}", show_progress=self.show_progress)

    def main_pass(self) -> dict[str, np.ndarray]:
        scorers = [m for m in ("baseline", "qk", "attention", "lens") if m in self.cfg.methods or m == "baseline"]

        def records(chunk, rendered, toks, scores):
            out = []
            for j, (i, r) in enumerate(zip(chunk, rendered)):
                n = len(r.options)
                letters = scores["letter_logits"][j, :n]
                out.append({"id": self.items[i].id, "gold": r.gold, "n_options": n, "n_tokens": len(toks[j].input_ids),
                            "labels": r.labels, "letter_logits": [round(float(x), 5) for x in letters],
                            "pred_baseline": int(np.argmax(letters)),
                            **sample_fields(self.items[i], i, [(r.text, a) for a in r.answer_strings])})
            return out

        return self.run_pass("main", lambda i: self.rendered[i], range(len(self.items)), scorers, records=records,
                             save=True)

    def perm_pass(self) -> tuple[dict[str, np.ndarray], list[list[int]]]:
        rng = random.Random(f"pa-{self.cfg.seed}")
        orders = [permutation_order(len(it.options), rng) for it in self.items]
        scorers = [m for m in ("baseline", "qk", "attention") if m in self.cfg.methods or m == "baseline"]
        arrays = self.run_pass("perm", lambda i: self.prompts.render(self.items[i].permuted(orders[i])), range(len(self.items)), scorers)
        return arrays, orders

    def pride_pass(self) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """Letter logits [rows, n_max] of every validation item under each cyclic shift of its
        own essential options (000 eq. 5; items may differ in option count), and the
        ``(item, shift)`` pair of each row, items in validation order, shifts 0..n-1."""
        pairs = [(int(i), p) for i in self.split.val for p in range(len(self.items[i].options))]

        def prompt(k: int) -> RenderedPrompt:
            i, p = pairs[k]
            n = len(self.items[i].options)
            return self.prompts.render(self.items[i].permuted([(j + p) % n for j in range(n)]))

        return self.run_pass("pride", prompt, range(len(pairs)), ["baseline"])["letter_logits"], pairs

    def ablation_pass(self, name: str, heads: Sequence[tuple[int, int]]) -> np.ndarray:
        by_layer: dict[int, list[int]] = {}
        for layer, head in heads:
            by_layer.setdefault(layer, []).append(head)
        edits = [ScaleHeads(layer, hs_, 0.0) for layer, hs_ in sorted(by_layer.items())]
        test = list(self.split.test)
        return self.run_pass(name, lambda i: self.rendered[i], test, ["baseline"], edits)["letter_logits"]

    def cloze_pass(self) -> tuple[np.ndarray, np.ndarray]:
        """Each choice's summed log-likelihood as a continuation, and that sum divided by the
        choice's length in characters: lm-eval's acc / acc_norm inputs (:mod:`whitebox_eval.tasks.lm_eval`).
        An item's requests are one group: their shared context is computed once
        (:func:`~whitebox_eval.mcqa.scoring.continuation_logprobs`). Items are batched longest
        first (:func:`~whitebox_eval.internals.prefixes.batch_order`; arrays and samples come back in
        item order). Log-likelihoods are kept in float64 so near-ties are decided as lm-eval decides them.
        Without a main pass (a cloze-only study) it streams ``samples.jsonl`` itself."""
        def score(chunk: list[int]):
            requests = [self.prompts.cloze_tokens(self.items[i]) for i in chunk]
            ctx = [c for reqs, _, _ in requests for c, _ in reqs]
            # items of a batch may share demonstrations (nothing marks where they end); each context's last
            # token is scored; one item's context is shared by its choices without a prefix
            shared = len(chunk) > 1 and not self.user_edits  # under edits whole prompts (a cached prefix stays unedited)
            prefix = self.prefix_for(ctx, min(len(c) for c in ctx) - 1, MIN_UNMARKED_TOKENS) if shared else None
            lp = continuation_logprobs(self.engine, [reqs for reqs, _, _ in requests], prefix=prefix, edits=self.user_edits)
            ll = np.full((len(chunk), self.n_essential), -np.inf, dtype=np.float64)
            norm = np.full_like(ll, -np.inf)
            k, records = 0, []
            for row, (i, (_, pairs, choices)) in enumerate(zip(chunk, requests)):
                n = len(choices)
                ll[row, :n] = lp[k:k + n]
                norm[row, :n] = ll[row, :n] / lm_eval.choice_lengths(choices)
                k += n
                it = self.items[i]
                records.append({"id": it.id, "gold": it.gold, "n_options": n, **sample_fields(it, i, pairs)})
            return (None if self.letters else records), {"loglik": ll, "loglik_norm": norm}

        def lengths():  # each item's first context and the tokens its packed row holds
            for i in range(len(self.items)):
                reqs = self.prompts.cloze_tokens(self.items[i])[0]
                yield reqs[0][0], packed_length([c + x[:-1] for c, x in reqs])

        ids = [it.id for it in self.items]
        arrays = run_pass(self.folder, "cloze", ids, self.cfg.batch_size, score, world=self.world,
                          desc="mcqa cloze", show_progress=self.show_progress, dtype=np.float64,
                          order=batch_order(lengths()))
        return arrays["loglik"], arrays["loglik_norm"]


def run_mcqa(
    cfg: MCQAConfig,
    output: str | Path = "runs",
    *,
    run_id: str | None = None,
    resume: bool = False,
    loaded: LoadedModel | None = None,
    show_progress: bool | None = None,
) -> RunFolder:
    """Run (or resume) a study and write its run folder; returns the folder. The config checked its
    methods, prompt style and edits' text when it was made; ``--save-activations`` is checked here
    against the model's sizes before any data is read, and ``--edit`` is built once for the loaded
    model (every size and width checked), both before the run folder."""
    check_saved(cfg, loaded)
    edits = []
    if cfg.edits:  # every pass runs under them
        loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
        edits = feature_edits.user_edits(cfg.edits, loaded)
    with recording() as read:  # every data file opened, for config.yaml's data_files
        items, demos, lm_tasks = _items_and_demos(cfg)
    generated = SYNTHETIC_DEFAULT_LIMIT if not cfg.spec.is_lm_eval and cfg.spec.record.is_generator else None
    # what the task offers for evaluation (demonstrations already removed; a generated task made only its share)
    n_total = offered(len(items), generated, cfg.limit)
    if cfg.limit is not None:  # a fraction of a file's items; a generated task made its share already
        items = items[: taken(cfg.limit, generated or len(items))]
    _check_items(items, demos)
    config = {**cfg.to_dict(), **_study_notes(cfg, items, demos, lm_tasks)}
    writer = None
    if counted(cfg.edits):  # an edit that reaches only some prompts (attn: cells): counted before the run folder
        loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
        writer = PromptWriter(cfg, loaded.tokenizer, demos)
        config.update(edit_coverage(cfg.edits, writer.lengths(items)))
    ranks = current_world()
    folder = open_run(output, config, run_id=run_id, resume=resume, world=ranks, data_files=read)
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    writer = writer or PromptWriter(cfg, loaded.tokenizer, demos)
    study = _Study(cfg, folder, loaded, items, writer, edits, show_progress, ranks)
    study.n_total = n_total
    plan_passes(folder, pass_plan(study))  # progress says pass k of N, with the study's time left
    folder.log(f"{len(items)} items, model {cfg.model}, methods {','.join(cfg.methods)}"
               + (f", rank {ranks.rank} of {ranks.size}" if ranks.distributed else ""))
    return finalize(study)


def _items_and_demos(cfg: MCQAConfig) -> tuple[list[MCQItem], Demonstrations, list | None]:
    """The task's items before ``--limit``, their demonstrations, and an ``lm-eval:TASK`` study's tasks
    (lm-eval's sampler drew each item's demonstrations into its ``meta``; None for other tasks)."""
    if cfg.spec.is_lm_eval:
        items, lm_tasks = _lm_eval_items(cfg)
        return items, Demonstrations(), lm_tasks
    items = load_items(cfg)
    demos, items = plan_demonstrations(cfg.spec, cfg.shots, items, cfg.seed, cfg.on_bad_row, cfg.demos_source,
                                       lm_eval_sampler=cfg.prompt == lm_eval.LM_EVAL)
    return items, demos, None


def _check_items(items: Sequence[MCQItem], demos: Demonstrations) -> None:
    if not items:
        raise WhiteboxError("the task produced no items")
    if len({it.id for it in items}) != len(items):
        raise WhiteboxError("item ids are not unique; every row needs its own id")
    if set(demos.ids()) & {it.id for it in items}:  # cannot happen by construction; a guard for new sources
        raise WhiteboxError("a demonstration is also an evaluated item; report this as a bug")


def _study_notes(cfg: MCQAConfig, items: Sequence[MCQItem], demos: Demonstrations, lm_tasks) -> dict:
    """config.yaml's keys beside the config's own: the demonstrations, lm-eval's view and tasks, the prompt
    style and the chat template's rule."""
    notes: dict = {"demonstrations": demos.to_config()}  # where they came from and their ids
    if lm_tasks is not None:
        notes["demonstrations"] = lm_eval_demonstrations(items)
        notes["lm_eval_view"] = {"view": cfg.view, "rule": VIEW_RULES[cfg.view]}
        notes["lm_eval_tasks"] = [t.to_config() for t in lm_tasks]
    if cfg.prompt == lm_eval.LM_EVAL:
        notes["prompt_style"] = {"style": "lm-eval", "lm_eval_version": lm_eval.LM_EVAL_VERSION,
                                 "tasks": sorted({it.meta.get("lm_eval_task") or lm_eval.doc(cfg.spec.record, it).task
                                                  for it in items})}
    if cfg.apply_chat_template:  # what --apply-chat-template does, exactly (mcqa/chat.py)
        notes["chat_template"] = {"rule": CHAT_RULE}
    return notes


def lm_eval_demonstrations(items: Sequence[MCQItem]) -> dict:
    """config.yaml's ``demonstrations`` of an ``lm-eval:TASK`` study: lm-eval's own sampler."""
    shots = max((len(it.meta.get("lm_eval_demos", ())) for it in items), default=0)
    return {"source": "lm-eval sampler", "shots": shots, "fewshot_random_seed": lm_eval.FEWSHOT_SEED,
            "note": "each item's demonstrations are the documents lm-eval's few-shot sampler drew for it, in document "
                    f"order after set_fewshot_seed({lm_eval.FEWSHOT_SEED}), as lm_eval.simple_evaluate draws them"}


def _lm_eval_items(cfg: MCQAConfig):
    """``(items, tasks)`` of ``--task lm-eval:TASK`` (:mod:`whitebox_eval.tasks.lm_eval_tasks`)."""
    from whitebox_eval.tasks.lm_eval_tasks import load_items as load_lm_eval_items

    items, tasks = load_lm_eval_items(cfg.spec.lm_eval_task, shots=cfg.shots, data=cfg.lm_eval_data)
    if cfg.view == "letters" and (partial := [t.name for t in tasks if t.multiple_input]):
        raise WhiteboxError(f"lm-eval's {', '.join(partial)} scores one context per choice (partial evaluation): there "
                            "is no question to list the options under, so only --view cloze applies")
    return items, tasks
