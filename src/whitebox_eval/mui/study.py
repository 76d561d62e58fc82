"""A MUI study: responses, key neurons, accuracy and MUI of one model on one task (paper 001 sec. 2-3).

Per batch: build the prompts (App. A.6 format), get the responses (greedy generation or
from the data), check them, then one teacher-forced pass over prompt + response gives
every sample's key set (:mod:`whitebox_eval.mui.keyneurons`). The run folder streams one
``samples.jsonl`` line per sample and one key-set part per batch, so ``--resume``
continues an interrupted run; the per-sample key sets are kept
(``arrays/key_sets.safetensors``), so the MUI of any subset is recomputed from the
folder alone (:func:`load_key_sets`, :func:`subset_mui`).

Results (``results.json``, fractions with ``_ci`` / ``_n`` / ``_ci_method`` beside them as
:mod:`whitebox_eval.stats` writes them): accuracy with its Wilson interval and MUI with a
jackknife interval (:mod:`whitebox_eval.mui.statistics`), activated / total units, the threshold's effective fraction of ``d_ff``,
the number of responses truncated by the token budget, PUR (eq. 7, percent units), MUI
of correct vs incorrect responses compared at equal subset size by a permutation test
of the labels (sec. 3.7), MUI per group (domain / category, sec. 3.6), and per-layer
utilisation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from whitebox_eval.datafiles import recording
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Engine
from whitebox_eval.internals.prefixes import PrefixCache
from whitebox_eval.sae.feature_edits import user_edits
from whitebox_eval.mui.config import MUIConfig, threshold_setting  # noqa: F401  (imported from here by the suite's studies)
from whitebox_eval.mui.explorer import token_view
from whitebox_eval.mui.finalize import KEY_SETS_FILE, PASS, finalize, moves_declaration  # noqa: F401  (read back by name)
from whitebox_eval.sae.sets import SAESet, load_sae_set, split_spec
from whitebox_eval.mui.keyneurons import KeyNeuronConfig, ScoredSequence, sample_key_mask, token_scores
from whitebox_eval.sae.sources import resolve_sae
from whitebox_eval.sae.fidelity import evaluate_fidelity, judged
from whitebox_eval.runs import RunFolder, open_run
from whitebox_eval.runs.folder import ARRAYS_DIR
from whitebox_eval.runs.pass_plan import plan_passes
from whitebox_eval.runs.passes import iter_parts, run_pass
from whitebox_eval.runs.kept import kept
from whitebox_eval.mui.responses import PreparedTask, prepare_task, respond
from whitebox_eval.mui.activations import Saver, check as check_saved
from whitebox_eval.mui.answer_classes import response_class



def run_mui(
    cfg: MUIConfig,
    output: str | Path = "runs",
    *,
    run_id: str | None = None,
    resume: bool = False,
    loaded=None,
    show_progress: bool | None = None,
) -> RunFolder:
    """Run (or resume) a MUI study and write its run folder; returns the folder. The config refused
    a malformed ``--edit`` or one at ``@last`` when it was made; the key-neuron settings and every
    ``--sae`` source are checked before the model loads, the edits and ``--save-activations`` against
    it, all before the run folder."""
    from whitebox_eval.internals.edit_coverage import counted, edit_coverage
    from whitebox_eval.models import load_model

    kcfg = cfg.key_neuron_config()
    if (cfg.score == "sae") != bool(cfg.sae):
        raise WhiteboxError("--score sae needs --sae LAYER=PATH (or an SAE run folder), and --sae is only used with "
                            "--score sae")
    for spec in cfg.sae:  # a source that is nowhere: one line before the model loads
        resolve_sae(split_spec(spec)[1])
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    edits = user_edits(cfg.edits, loaded)
    sae_set = load_sae_set(cfg.sae, loaded.arch) if cfg.sae else None
    with recording() as read:  # every data file opened, for config.yaml's data_files
        task = prepare_task(cfg, loaded.tokenizer)
    check_saved(cfg, loaded, task)
    config = cfg.to_dict()
    if sae_set is not None:  # what each SAE is: route, release, id, hook, commit, SHA-256 (sae/sources.py)
        config["sae_sources"] = sae_set.sources
    config.update(task.gen.notes if task.gen is not None else {})
    if task.demonstration is not None:
        config["demonstration"] = {"source": "the file's first row (held out)", "question": task.demonstration[0]}
    if counted(cfg.edits):  # attn: cells: counted on each item's prompt and the response it may have
        config.update(edit_coverage(cfg.edits, reach(loaded.tokenizer, task),
                                    generates="counting the tokens each response may generate"))
    folder = open_run(output, config, run_id=run_id, resume=resume, data_files=read)
    return _Study(cfg, kcfg, folder, loaded, task, edits, sae_set).run(show_progress)


class _Study:
    """One MUI run: the model under ``--edit``, the task, the SAEs, and the scoring of a batch of items."""

    def __init__(self, cfg: MUIConfig, kcfg: KeyNeuronConfig, folder: RunFolder, loaded, task: PreparedTask,
                 edits: list, sae_set: SAESet | None):
        self.cfg, self.kcfg, self.folder, self.loaded, self.task, self.edits = cfg, kcfg, folder, loaded, task, edits
        self.sae_set = sae_set
        self.engine = Engine(loaded).under(edits)  # --edit: the responses and every scoring pass
        self.prefixes = None if edits else PrefixCache(self.engine)  # a shared demonstration or chat header, computed once
        self.n_layers, self.width, self.kind = ((len(sae_set.layers), sae_set.width, "feature") if sae_set is not None
                                                else (loaded.arch.n_layers, loaded.arch.d_ff, "neuron"))
        self.budget = max(task.settings(it)[1] for it in task.items)
        folder.log(f"{len(task.items)} items, model {cfg.model}, prompt format {task.fmt}")
        self.saver = Saver(cfg, folder, self.engine, task, self.budget) if cfg.save_activations else None

    def run(self, show_progress: bool | None) -> RunFolder:
        """The one pass (responses, then key units), the SAE fidelity figures, then the results."""
        folder, task, sae_set = self.folder, self.task, self.sae_set
        ids = [it.id for it in task.items]
        plan_passes(folder, [(PASS, len(ids))])
        run_pass(folder, PASS, ids, self.cfg.batch_size, self.saver.wrap(self.score) if self.saver else self.score,
                 desc="mui batches", show_progress=show_progress, collect=False)
        fidelity = (_sae_fidelity(folder, self.loaded, sae_set, self.cfg.batch_size, show_progress, self.edits)
                    if sae_set is not None else None)
        return finalize(folder, task.items, self.n_layers, self.width, self.kind, self.cfg, sae_set, fidelity,
                        self.budget, self.saver and self.saver.merge())

    def score(self, chunk: list[int]):
        """A batch's sample records and arrays: each item's response, its key units (flat indices with
        offsets) and, with SAEs, its sequences and the reconstruction statistics."""
        task, tokenizer, sae_set = self.task, self.loaded.tokenizer, self.sae_set
        items = [task.items[i] for i in chunk]
        prompts, responses = (self.saver.respond if self.saver else respond)(self.loaded, task, items, engine=self.engine)
        scorable = [j for j, r in enumerate(responses) if r.ids]
        masks: dict[int, np.ndarray] = {}
        tokens: dict[int, dict] = {}  # the report's per-token view (mui/explorer.py)
        if scorable:
            seqs = [ScoredSequence(prompts[j], responses[j].ids) for j in scorable]
            for j, scores in zip(scorable, token_scores(self.engine, seqs, self.kcfg, sae_set, self.prefixes)):
                m = sample_key_mask(scores, self.kcfg)  # key_masks, with the scores kept for the per-token view
                masks[j] = np.flatnonzero(m.numpy().reshape(-1)).astype(np.int64)
                tokens[j] = token_view(scores, m, responses[j].ids, tokenizer)
        flats = [masks.get(j, np.zeros(0, dtype=np.int64)) for j in range(len(items))]
        offsets = np.zeros(len(items) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([f.size for f in flats])
        arrays = {"indices": np.concatenate(flats), "offsets": offsets}
        if sae_set is not None:  # the sequences, for the SAE fidelity figures; reconstruction at the scored positions
            toks = [np.asarray(list(prompts[j]) + list(responses[j].ids), dtype=np.int64) for j in scorable]
            arrays["sae_seq_ids"] = np.concatenate(toks) if toks else np.zeros(0, dtype=np.int64)
            arrays["sae_seq_offsets"] = np.concatenate([[0], np.cumsum([t.size for t in toks])]).astype(np.int64)
            for n, q in enumerate(sae_set.take_quality()):
                if q.n:
                    arrays.update({f"sae{n}_n": np.array(q.n), f"sae{n}_sum_x": q.sum_x, f"sae{n}_sum_sq": np.array(q.sum_sq),
                                   f"sae{n}_sse": np.array(q.sse), f"sae{n}_active": q.active})
        records = []
        for j, it in enumerate(items):
            r = responses[j]
            scored = task.score(it, r, tokenizer)
            records.append({
                "id": it.id, "group": it.group, "gold": it.gold, "prompt": task.prompt_text(it, tokenizer),
                **({"arguments": it.meta["lm_eval_arguments"]} if "lm_eval_arguments" in it.meta else {}),
                "response": scored["text"],
                "correct": bool(scored["correct"]), "n_prompt_tokens": len(prompts[j]),
                "n_response_tokens": len(r.ids), "stopped_by": r.stopped_by, "n_key_units": int(flats[j].size),
                **tokens.get(j, {}),
                **({"lm_eval": {"filters": scored["filters"], "primary": scored["primary"]}} if "filters" in scored else {}),
                **({"execution": scored["execution"]} if "execution" in scored else {}),
            })
            records[-1]["class"] = response_class(it, records[-1])
        return records, arrays


def reach(tokenizer, task) -> list[int]:
    """Each item's longest sequence (``--edit`` coverage): its prompt and its given response, or every
    token its response may generate."""
    from whitebox_eval.mui.responses import given_response

    return [len(task.prompt(it, tokenizer)) + (len(given_response(tokenizer, task.given[it.id]).ids)
                                               if task.given is not None else task.settings(it)[1])
            for it in task.items]


def _sae_fidelity(folder: RunFolder, lm, sae_set: SAESet, batch_size: int, show_progress: bool | None,
                  edits=()) -> dict:
    """Per SAE layer: the fidelity figures (:mod:`whitebox_eval.sae.fidelity`) on the task's
    prompt + response tokens, of the model under the run's ``--edit`` (as every other pass), with the study's progress (three forwards a batch: after the last
    sample, minutes on long prompts); the stage arrays/sae_fidelity.json (reused on resume, judged
    by today's thresholds)."""
    def compute() -> dict:
        seqs: list[list[int]] = []
        for z in iter_parts(folder, PASS):
            if "sae_seq_ids" in z:
                offs, toks = z["sae_seq_offsets"], z["sae_seq_ids"]
                seqs += [toks[offs[i]:offs[i + 1]].tolist() for i in range(len(offs) - 1)]
        seqs = [q for q in seqs if len(q) >= 2]
        return {str(layer): evaluate_fidelity(lm, sae, layer, seqs, point=sae_set.point, batch_size=batch_size,
                                              judge_dead=False, show_progress=show_progress, edits=edits)
                if seqs else {"n_tokens": 0} for layer, sae in zip(sae_set.layers, sae_set.saes)}

    figures = kept(folder.path / ARRAYS_DIR, "sae_fidelity", compute)
    return {layer: judged(fid, judge_dead=False) for layer, fid in figures.items()}
