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

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from whitebox_eval.datafiles import recording
from whitebox_eval import stats
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Engine
from whitebox_eval.command_options import parsed_edits
from whitebox_eval.internals.prefixes import PrefixCache
from whitebox_eval.sae.feature_edits import refuse_last, user_edits
from whitebox_eval.mui.statistics import (correct_vs_incorrect, jackknife_mui, lm_eval_metrics, samples_budget,
                                        threshold_summary)
from whitebox_eval.mui.explorer import token_view
from whitebox_eval.sae.sets import SAESet, load_sae_set, split_spec
from whitebox_eval.mui.keyneurons import (KeyNeuronConfig, ScoredSequence, sample_key_mask,
                                          token_scores)
from whitebox_eval.sae.encoding import ReconstructionStats
from whitebox_eval.sae.study import fidelity_summary
from whitebox_eval.sae.sources import feature_links, resolve_sae
from whitebox_eval.sae.fidelity import evaluate_fidelity, judged
from whitebox_eval.mui.thresholds import DEFAULT_SAE_TOPK
from whitebox_eval.mui.utility_law import Direction, classify_direction, performance_utilization_ratio
from whitebox_eval.mui.utilization import KeySets
from whitebox_eval.runs import RunFolder, open_run
from whitebox_eval.runs.folder import ARRAYS_DIR
from whitebox_eval.runs.pass_plan import plan_passes
from whitebox_eval.runs.passes import iter_parts, run_pass
from whitebox_eval.runs.kept import kept
from whitebox_eval.runs.limits import checked
from whitebox_eval.mui.responses import prepare_task, respond
from whitebox_eval.mui.activations import POSITIONS as SAVE_POSITIONS, Saver, check as check_saved, parse_activations
from whitebox_eval.tasks.generation import GenItem
from whitebox_eval.tasks.spec import GENERATION_TASKS, GENERATION_USAGE as TASK_USAGE, TaskSpec

PASS = "mui"  # the one pass: responses, then key units per sample

KEY_SETS_FILE = "key_sets.safetensors"

THRESHOLDS: dict[str, str] = {
    "top-per-mille": "top_fraction", "top-fraction": "top_fraction", "topk": "topk",
    "global-topk": "global_topk", "topscore": "topscore",
}
"""CLI threshold names -> App. A.4 functions (top-per-mille = top-fraction with 0.001)."""


def threshold_setting(name: str, value: float | None) -> tuple[str, float | None]:
    """``(method, value)`` for :func:`whitebox_eval.mui.thresholds.key_mask` from a CLI name."""
    key = name.strip().lower().replace("_", "-")
    if key not in THRESHOLDS:
        raise WhiteboxError(f"unknown threshold {name!r}; choose {', '.join(THRESHOLDS)}")
    if key == "top-per-mille":
        if value is not None:
            raise WhiteboxError("top-per-mille is fixed at 0.001; use --threshold top-fraction --threshold-value F for other fractions")
        return "top_fraction", 1e-3
    if key != "top-fraction" and value is None:
        raise WhiteboxError(f"--threshold {key} needs --threshold-value (k for topk/global-topk, a ratio for topscore)")
    return THRESHOLDS[key], value


REFERENCE_CODE_SETTINGS: dict[str, str] = {
    "activation": "mlp_gate_act", "score_token": "at", "unit": "pair", "final_norm": "none",
}
"""What ``--reference-code-compat`` sets: the authors' ``get_neuron.py`` hooks ``act_fn`` (act(gate)
only), scores the response tokens' own positions against the token *at* each position, pools
(position, neuron) pairs per layer and uses the raw ``lm_head`` (no final norm)."""


@dataclass
class MUIConfig:
    """Everything that determines a MUI study's numbers (written to config.yaml)."""

    model: str = "smollm2-135m"
    task: str | TaskSpec = "arithmetic-gen"  # read once into ``spec``; config.yaml records the canonical text
    score: str = "contribution"
    activation: str = "mlp_act"
    final_norm: str = "none"
    response_level: bool = False
    threshold: str = "top-per-mille"
    threshold_value: float | None = None
    unit: str = "pair"
    ties: str = "include"
    score_token: str = "next"
    reference_code_compat: bool = False
    ig_steps: int = 10
    ig_joint_layers: bool = False
    sae: tuple[str, ...] = ()
    shots: str = "auto"
    chat: str = "auto"
    responses: str = "model"
    max_new_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    n_options: int = 4
    limit: int | float | None = 100  # N items, or a fraction below 1 of the task's items (runs/limits.py)
    seed: int = 0
    batch_size: int = 8
    dtype: str = "float32"
    answer: str | None = None  # --answer of gen=PATH (config.yaml: task_spec.answer)
    fields: tuple[str, ...] = ()  # --field NAME=COLUMN of gen=PATH (config.yaml: task_spec.fields)
    lm_eval_data: str | None = None  # --lm-eval-data DIR of lm-eval:TASK
    allow_code_execution: bool = False  # lm-eval tasks whose metric runs the model's code
    on_bad_row: str = "skip"  # a malformed row of a local file: skip it (listed) or stop ("error")
    save_activations: tuple[str, ...] = ()  # --save-activations SPEC (mui/activations.py)
    edits: tuple[str, ...] = ()  # --edit SPEC: the responses and every scoring pass run under these
    # on_bad_row never changes a finished run's numbers ("error" stops at the first bad row), so a resume may change it
    volatile: tuple[str, ...] = field(default=("batch_size", "on_bad_row"), repr=False)

    def __post_init__(self) -> None:
        self.edits = parsed_edits(self.edits)  # a malformed spec: one line, here
        refuse_last(self.edits, "mui generates its responses and scores every response token")
        self._spec = TaskSpec.parse(self.task, GENERATION_TASKS, TASK_USAGE, fields=self.fields, answer=self.answer)
        self.task, self.limit = str(self._spec), checked(self.limit)
        if not self._spec.is_lm_eval:  # what took effect only: the options of the tasks that read them
            self.lm_eval_data = None
        self.allow_code_execution = self.allow_code_execution and (self._spec.is_lm_eval or bool(self._spec.record.runs_code))
        self.sae, self.edits = tuple(self.sae), tuple(self.edits)
        self.save_activations = tuple(s.text for s in parse_activations(self.save_activations, SAVE_POSITIONS))
        if self.reference_code_compat:
            want = REFERENCE_CODE_SETTINGS
            clash = {k: getattr(self, k) for k, v in want.items() if getattr(self, k) not in (v, MUIConfig.defaults()[k])}
            if clash:
                raise WhiteboxError("--reference-code-compat sets " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v
                                                                in want.items())
                                    + "; drop " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in clash.items()))
            if self.score not in ("contribution", "activation"):
                raise WhiteboxError("--reference-code-compat reproduces the authors' get_neuron.py: "
                                    "use --score contribution or activation")
            for k, v in want.items():
                setattr(self, k, v)

    @staticmethod
    def defaults() -> dict:
        return {f.name: f.default for f in dataclasses.fields(MUIConfig)}

    @property
    def spec(self) -> TaskSpec:
        """The task, read once (:class:`~whitebox_eval.tasks.spec.TaskSpec`)."""
        return self._spec

    def key_neuron_config(self) -> KeyNeuronConfig:
        method, value = threshold_setting(self.threshold, self.threshold_value)
        if self.score == "sae" and self.threshold == "top-per-mille":
            method, value = "top_fraction", None  # the SAE default: top-50 per layer (eq. 9)
        return KeyNeuronConfig(
            score=self.score, activation=self.activation, final_norm=self.final_norm,
            response_level=self.response_level, threshold=method, threshold_value=value, unit=self.unit,
            ties=self.ties, ig_steps=self.ig_steps, ig_joint_layers=self.ig_joint_layers, score_token=self.score_token,
        ).validate()

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["sae"], d["edits"] = list(self.sae), list(self.edits)
        d["stop"] = None if self.stop is None else list(self.stop)
        d["_volatile"] = list(d.pop("volatile"))
        for key in ("answer", "fields", "lm_eval_data", "allow_code_execution", "save_activations", "edits"):  # only when given
            if not d[key]:
                del d[key]
        d["task_spec"] = self.spec.to_config()
        d["suite"] = "mui"
        d["key_set_rule"] = self.key_set_rule()
        return d

    def key_set_rule(self) -> str:
        """Words for config.yaml: is this the paper's key-neuron rule?"""
        if self.reference_code_compat:
            return "authors' code (get_neuron.py): act(gate), token at p, pooled pairs; not eq. 2 as printed"
        unit = ("pooled (response token, neuron) pairs, eq. 8/10 (the paper's)" if self.unit == "pair"
                else "best score per neuron, exactly k per layer (not the paper's rule)")
        token = "next token, eq. 2 (the paper's)" if self.score_token == "next" else "token at p (authors' code)"
        return f"{unit}; scored against the {token}"


def run_mui(
    cfg: MUIConfig,
    output: str | Path = "runs",
    *,
    run_id: str | None = None,
    resume: bool = False,
    loaded=None,
    show_progress: bool | None = None,
) -> RunFolder:
    """Run (or resume) a MUI study and write its run folder; returns the folder."""
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
    engine = Engine(loaded).under(edits)  # --edit: the responses and every scoring pass
    prefixes = None if edits else PrefixCache(engine)  # a shared demonstration or chat header, computed once
    n_layers, width, kind = ((len(sae_set.layers), sae_set.width, "feature") if sae_set is not None
                             else (loaded.arch.n_layers, loaded.arch.d_ff, "neuron"))
    ids = [it.id for it in task.items]
    folder.log(f"{len(ids)} items, model {cfg.model}, prompt format {task.fmt}")
    saver = Saver(cfg, folder, engine, task, max(task.settings(it)[1] for it in task.items)) if cfg.save_activations else None

    def score(chunk: list[int]):
        items = [task.items[i] for i in chunk]
        prompts, responses = (saver.respond if saver else respond)(loaded, task, items, engine=engine)
        scorable = [j for j, r in enumerate(responses) if r.ids]
        masks: dict[int, np.ndarray] = {}
        tokens: dict[int, dict] = {}  # the report's per-token view (mui/explorer.py)
        if scorable:
            seqs = [ScoredSequence(prompts[j], responses[j].ids) for j in scorable]
            for j, scores in zip(scorable, token_scores(engine, seqs, kcfg, sae_set, prefixes)):
                m = sample_key_mask(scores, kcfg)  # key_masks, with the scores kept for the per-token view
                masks[j] = np.flatnonzero(m.numpy().reshape(-1)).astype(np.int64)
                tokens[j] = token_view(scores, m, responses[j].ids, loaded.tokenizer)
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
            scored = task.score(it, r, loaded.tokenizer)
            records.append({
                "id": it.id, "group": it.group, "gold": it.gold, "prompt": task.prompt_text(it, loaded.tokenizer),
                **({"arguments": it.meta["lm_eval_arguments"]} if "lm_eval_arguments" in it.meta else {}),
                "response": scored["text"],
                "correct": bool(scored["correct"]), "n_prompt_tokens": len(prompts[j]),
                "n_response_tokens": len(r.ids), "stopped_by": r.stopped_by, "n_key_units": int(flats[j].size),
                **tokens.get(j, {}),
                **({"lm_eval": {"filters": scored["filters"], "primary": scored["primary"]}} if "filters" in scored else {}),
                **({"execution": scored["execution"]} if "execution" in scored else {}),
            })
        return records, arrays

    plan_passes(folder, [(PASS, len(ids))])  # one pass: responses, then key units
    run_pass(folder, PASS, ids, cfg.batch_size, saver.wrap(score) if saver else score, desc="mui batches",
             show_progress=show_progress, collect=False)
    fidelity = (_sae_fidelity(folder, loaded, sae_set, cfg.batch_size, show_progress, edits)
                if sae_set is not None else None)
    budget = max(task.settings(it)[1] for it in task.items)
    return finalize(folder, task.items, n_layers, width, kind, cfg, sae_set, fidelity, budget, saver and saver.merge())


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


def _sae_quality(folder: RunFolder, sae_set: SAESet) -> dict:
    """Per SAE layer: explained variance and dead features over every token the run encoded."""
    total = [ReconstructionStats() for _ in sae_set.saes]
    for z in iter_parts(folder, PASS):
        for n in range(len(total)):
            if f"sae{n}_n" in z:
                total[n] = total[n].merge(ReconstructionStats(
                    int(z[f"sae{n}_n"]), z[f"sae{n}_sum_x"], float(z[f"sae{n}_sum_sq"]), float(z[f"sae{n}_sse"]),
                    z[f"sae{n}_active"]))
    return {str(layer): q.summary() for layer, q in zip(sae_set.layers, total)}


def _read_parts(folder: RunFolder, ids: list[str]) -> dict[str, np.ndarray]:
    """``{sample id: flat key indices}`` from the pass's parts."""
    out: dict[str, np.ndarray] = {}
    for z in iter_parts(folder, PASS):
        offs = z["offsets"]
        for n, i in enumerate(z["index"].tolist()):
            out[str(ids[i])] = z["indices"][offs[n]:offs[n + 1]].astype(np.int64)
    return out


def _threshold_summary(cfg: MUIConfig, width: int, n_layers: int) -> dict:
    kcfg = cfg.key_neuron_config()
    method, value = kcfg.threshold, kcfg.threshold_value
    if cfg.score == "sae" and method == "top_fraction" and value is None:
        method, value = "topk", DEFAULT_SAE_TOPK  # eq. 9
    out = threshold_summary(method, value, width, n_layers, kcfg.unit)
    out["paper_rule"] = kcfg.unit == "pair" and cfg.score_token == "next"
    return out


def _truncation(items: list[GenItem], samples: dict, cfg: MUIConfig, budget: int | None = None) -> dict:
    """Generated responses that hit the token budget (``stopped_by`` None) instead of EOS / a stop string."""
    if cfg.responses != "model":
        return {"n_truncated_responses": 0, "truncated_ids": []}
    ids = [it.id for it in items if samples[it.id].get("stopped_by") is None]
    return {"n_truncated_responses": len(ids), "truncated_ids": ids, "max_new_tokens": budget or samples_budget(cfg)}


def moves_declaration() -> dict:
    """How ``compare`` and the report name a move between two runs of one task (sec. 3.3):
    the signs of the accuracy and MUI changes, named by :func:`classify_direction`."""
    sign = {"up": 1.0, "down": -1.0}
    names = {f"{a},{m}": classify_direction((0.0, 0.0), (sign[a], sign[m])).value for a in sign for m in sign}
    return {"axes": ["accuracy", "mui"], "names": {**names, "unchanged": Direction.UNDETERMINED.value},
            "note": "directions of paper 001 sec. 3.3: evolving (accuracy up, MUI down), accumulating (both up), "
                    "coarsening (accuracy down, MUI up), collapsing (both down)"}


def finalize(folder: RunFolder, items: list[GenItem], n_layers: int, width: int, kind: str, cfg: MUIConfig,
             sae_set: SAESet | None = None, sae_fidelity: dict | None = None, budget: int | None = None, extra=None) -> RunFolder:
    """Assemble the key sets in item order; write key_sets, arrays, results.json and plots."""
    from whitebox_eval.mui.plots import plot_layer_utilization

    samples = {str(s["id"]): s for s in folder.read_samples()}
    flats = _read_parts(folder, [it.id for it in items])
    missing = [it.id for it in items if it.id not in samples or it.id not in flats]
    if missing:
        raise WhiteboxError(f"{len(missing)} samples are not finished yet; run again with --resume to finish them")
    ks = KeySets(n_layers, width, kind)
    for it in items:
        ks._append_flat(flats[it.id], it.id)
    ks.save(folder.path / "arrays" / KEY_SETS_FILE)
    correct = np.array([bool(samples[it.id]["correct"]) for it in items])
    folder.save_array("correct", correct.astype(np.int8))
    acc = float(correct.mean())
    mui_est = jackknife_mui(ks)
    mui = mui_est.value
    layer = ks.layer_mui()
    folder.save_array("layer_mui", layer)
    results: dict = {"n_items": len(items)}
    head: dict = {}  # accuracy and MUI as fractions with their intervals (the stats contract)
    stats.add_proportion(head, "accuracy", correct)
    if any(it.check == "execution" for it in items):  # HumanEval: one greedy completion each, pass@1 = accuracy
        stats.add_proportion(head, "pass@1", correct)
    stats.add_estimate(head, "mui", mui_est)
    results.update(head)
    results.update({
        "n_activated": ks.n_activated(), "total_units": ks.total_units, "n_layers": n_layers, "width": width,
        "kind": kind, "mean_key_units_per_sample": float(ks.counts().mean()),
        "n_empty_responses": int(sum(1 for it in items if samples[it.id]["n_response_tokens"] == 0)),
        "threshold": _threshold_summary(cfg, width, n_layers),
    })
    results.update(_truncation(items, samples, cfg, budget))
    by_task = lm_eval_metrics(items, samples)
    if by_task:
        results["lm_eval_metrics"] = by_task
        results["accuracy_rule"] = ("correct = the task's first metric under its first filter is 1 "
                                    f"({next(iter(samples.values()))['lm_eval']['primary']}); every filter's metrics: "
                                    "lm_eval_metrics")
    if mui > 0:
        results["pur"] = float(performance_utilization_ratio(100 * acc, 100 * mui))
    if correct.any():
        stats.add_estimate(results, "mui,correct", jackknife_mui(ks, correct))
        results["n_correct"] = int(correct.sum())
    if (~correct).any():
        stats.add_estimate(results, "mui,incorrect", jackknife_mui(ks, ~correct))
        results["n_incorrect"] = int((~correct).sum())
    results["correct_vs_incorrect"] = correct_vs_incorrect(ks, correct, seed=cfg.seed)
    groups: dict[str, list[int]] = {}
    for n, it in enumerate(items):
        groups.setdefault(it.group or "", []).append(n)
    if len(groups) > 1:
        by_group = {}
        for g, ix in groups.items():
            entry = {"n": len(ix)}
            stats.add_proportion(entry, "accuracy", correct[ix])
            stats.add_estimate(entry, "mui", jackknife_mui(ks, ix))
            by_group[g] = entry
        results["by_group"] = by_group
        results["by_group_note"] = "MUI is a union and grows with n: compare groups of equal n only"
    warnings = []
    if sae_set is not None:
        results["sae_quality"] = _sae_quality(folder, sae_set)
        results["sae_features"] = feature_links(sae_set.sources, map(ks.flat_indices, range(len(items))), width)
    if sae_fidelity is not None:
        results["sae_fidelity"] = sae_fidelity
        results["sae_summary"] = fidelity_summary(sae_fidelity, sae_set.paths if sae_set is not None else [])
        warnings += [f"layer {l}, fidelity on this task's tokens: {q['warning']}"
                     for l, q in sae_fidelity.items() if "warning" in q]
    scored = [i for i, it in enumerate(items) if samples[it.id]["n_response_tokens"] > 0]
    if len(scored) > 1 and len({ks.flat_indices(i).tobytes() for i in scored}) == 1:
        warnings.append(f"all {len(scored)} samples have the same key set: the scores do not tell samples apart")
    if results["n_truncated_responses"]:
        warnings.append(f"{results['n_truncated_responses']} of {len(items)} responses hit the "
                        f"{results['max_new_tokens']}-token budget and are truncated")
    results["warnings"] = warnings
    results["moves"] = moves_declaration()
    results["headline"] = head
    folder.save_results({**results, **(extra or {})})  # extra: --save-activations' record
    plot_layer_utilization(layer, folder.plot_path("layer_utilization"),
                           title=f"{cfg.model} on {cfg.task}: MUI {100 * mui:.2f}%, accuracy {100 * acc:.1f}%")
    return folder
