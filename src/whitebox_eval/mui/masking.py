"""Masking validation of the key-neuron threshold (paper 001 sec. 3.8, fig. 11, 22-26).

Key neurons are selected on a source task X: for every sample, each layer's top-``k``
neurons (unique neurons ranked by their best eq. 2 score over the response, App. A.4
layer-level top-k); the masked set for ``k`` is their union over the samples. For
increasing ``k``, those neurons are set to zero (``MaskNeurons`` at every position,
prompt included) while the model answers the items of X and of another task Y;
accuracy is compared with masking as many random neurons, layer by layer, drawn from
outside the key set (``matched_random_mask``). Masked responses are decoded greedily
with the engine (one pass per new token), and so is the unmasked baseline (``k = 0``),
so every point of a curve comes from the same decoder.

Every (task, masking, k) condition is one line of ``samples.jsonl``, so an
interrupted run resumes at the next condition; the per-sample rankings of X are
saved (``arrays/source_rankings.npy``) and reused on resume.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals import Engine, MaskNeurons
from whitebox_eval.mui import responses as rsp
from whitebox_eval.mui.keyneurons import KeyNeuronConfig, ScoredSequence, layer_rankings, token_scores
from whitebox_eval.mui.study import MUIConfig, prepare_task, respond
from whitebox_eval.mui.utilization import matched_random_mask
from whitebox_eval.runs import RunFolder, progress

DEFAULT_KS: tuple[int, ...] = (1, 2, 4, 8, 16)


@dataclass
class MaskingConfig:
    """A masking validation: key neurons of ``source_task`` masked while answering ``eval_tasks``."""

    model: str = "smollm2-135m"
    source_task: str = "arithmetic-gen"
    eval_tasks: tuple[str, ...] = ("arithmetic-gen", "ssd")
    ks: tuple[int, ...] = DEFAULT_KS
    score: str = "contribution"
    activation: str = "mlp_act"
    final_norm: str = "none"
    response_level: bool = False
    shots: str = "auto"
    chat: str = "auto"
    source_responses: str = "model"
    limit: int | None = 32
    seed: int = 0
    random_draws: int = 1
    generate: bool = True
    max_new_tokens: int | None = None
    batch_size: int = 8
    dtype: str = "float32"
    volatile: tuple[str, ...] = field(default=("batch_size",), repr=False)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["eval_tasks"], d["ks"] = list(self.eval_tasks), list(self.ks)
        d["_volatile"] = list(d.pop("volatile"))
        d["suite"] = "mui-masking"
        d["task"] = self.source_task
        return d

    def validate(self) -> MaskingConfig:
        if not self.ks or any(int(k) < 1 for k in self.ks):
            raise WhiteboxError(f"ks must be positive integers (neurons per layer per sample), got {list(self.ks)}")
        if not self.eval_tasks:
            raise WhiteboxError("give at least one evaluation task")
        if self.score not in ("contribution", "activation"):
            raise WhiteboxError("masking ranks neurons by --score contribution or activation")
        if self.random_draws < 1:
            raise WhiteboxError("random_draws must be >= 1")
        return self


def _study_cfg(cfg: MaskingConfig, task: str, responses: str = "model") -> MUIConfig:
    return MUIConfig(model=cfg.model, task=task, score=cfg.score, activation=cfg.activation,
                     final_norm=cfg.final_norm, shots=cfg.shots, chat=cfg.chat, responses=responses,
                     max_new_tokens=cfg.max_new_tokens, limit=cfg.limit, seed=cfg.seed,
                     batch_size=cfg.batch_size, dtype=cfg.dtype)


def source_rankings(lm, engine: Engine, cfg: MaskingConfig, show_progress: bool | None = None) -> np.ndarray:
    """Per-sample, per-layer neuron rankings on the source task, ``[n_samples, n_layers, max(ks)]``."""
    scfg = _study_cfg(cfg, cfg.source_task, cfg.source_responses)
    task = prepare_task(scfg, lm.tokenizer)
    kcfg = KeyNeuronConfig(score=cfg.score, activation=cfg.activation, final_norm=cfg.final_norm,
                           response_level=cfg.response_level).validate()
    k_max = max(int(k) for k in cfg.ks)
    out = []
    chunks = [task.items[i:i + cfg.batch_size] for i in range(0, len(task.items), cfg.batch_size)]
    for items in progress(chunks, desc="source key neurons", enabled=show_progress):
        prompts, responses = respond(lm, task, items)
        seqs = [ScoredSequence(p, r.ids) for p, r in zip(prompts, responses) if r.ids]
        if seqs:
            for s in token_scores(engine, seqs, kcfg):
                out.append(layer_rankings(s, k_max, response_level=cfg.response_level).numpy())
    if not out:
        raise WhiteboxError("no source sample produced a response to score")
    return np.stack(out)


def key_mask_for_k(rankings: np.ndarray, k: int, width: int) -> np.ndarray:
    """Union over samples of each layer's top-``k`` neurons, a bool ``[n_layers, width]`` mask."""
    if k > rankings.shape[2]:
        raise WhiteboxError(f"k={k} exceeds the stored ranking depth {rankings.shape[2]}")
    n, layers, _ = rankings.shape
    mask = np.zeros((layers, width), dtype=bool)
    for l in range(layers):
        mask[l, np.unique(rankings[:, l, :k])] = True
    return mask


def mask_edits(mask: np.ndarray) -> list[MaskNeurons]:
    """One ``MaskNeurons`` edit per layer with at least one masked neuron (value 0, all positions)."""
    return [MaskNeurons(l, np.flatnonzero(mask[l]).tolist()) for l in range(mask.shape[0]) if mask[l].any()]


def task_accuracy(lm, engine: Engine, task, edits: list, batch_size: int = 8) -> float:
    """Accuracy of greedy engine-decoded responses under ``edits`` on a prepared task."""
    correct = []
    for i in range(0, len(task.items), batch_size):
        items = task.items[i:i + batch_size]
        _, responses = respond(lm, dataclasses.replace(task, given=None), items, edits=edits, engine=engine)
        correct += [rsp.is_correct(it, r.text) for it, r in zip(items, responses)]
    return float(np.mean(correct))


def gold_logprob(lm, engine: Engine, task, edits: list, batch_size: int = 8) -> float:
    """Mean log-probability per token of the gold responses, teacher-forced under ``edits``.

    A smooth companion to accuracy (one pass per batch, no generation): masking that
    matters lowers it even when few answers flip.
    """
    from whitebox_eval.mui.keyneurons import _layout

    total, count = 0.0, 0
    for i in range(0, len(task.items), batch_size):
        items = task.items[i:i + batch_size]
        prompts = [rsp.prompt_ids(lm.tokenizer, rsp.build_prompt(it, task.spec.name, task.fmt, lm.tokenizer))
                   for it in items]
        seqs = [ScoredSequence(p, rsp.given_response(lm.tokenizer, it.gold_response).ids) for p, it in zip(prompts, items)]
        lay = _layout(engine, seqs)
        with torch.no_grad():
            logits = engine.run(lay.batch, edits=edits, logits=lay.positions).logits.float()
        logp = torch.log_softmax(logits, -1).gather(-1, lay.targets.to(logits.device).unsqueeze(-1)).squeeze(-1)
        valid = lay.valid.to(logp.device)
        total += float(logp[valid].sum())
        count += int(valid.sum())
    return total / count


def run_masking(
    cfg: MaskingConfig, output: str | Path = "runs", *, run_id: str | None = None, resume: bool = False,
    loaded=None, show_progress: bool | None = None,
) -> RunFolder:
    """Run (or resume) the masking validation; writes curves, results.json and the plot."""
    from whitebox_eval.models import load_model

    cfg.validate()
    loaded = loaded or load_model(cfg.model, dtype=cfg.dtype)
    folder_path = Path(output) / run_id if run_id else None
    if resume and folder_path is not None and folder_path.exists():
        folder = RunFolder.open_for_resume(folder_path, cfg.to_dict())
    else:
        folder = RunFolder.create(output, cfg.to_dict(), run_id=run_id, resume=resume)
    engine = Engine(loaded)
    width = loaded.arch.d_ff
    rank_path = folder.path / "arrays" / "source_rankings.npy"
    rankings = folder.load_array("source_rankings") if rank_path.is_file() else None
    if rankings is None or rankings.shape[2] < max(int(k) for k in cfg.ks):
        rankings = source_rankings(loaded, engine, cfg, show_progress)
        folder.save_array("source_rankings", rankings)
    tasks = {t: prepare_task(_study_cfg(cfg, t), loaded.tokenizer) for t in cfg.eval_tasks}
    conditions = [(t, "none", 0, 0) for t in cfg.eval_tasks]
    for k in cfg.ks:
        for t in cfg.eval_tasks:
            conditions.append((t, "key", int(k), 0))
            conditions += [(t, "random", int(k), d) for d in range(cfg.random_draws)]
    ids = [f"{t}|{kind}|k={k}|draw={d}" for t, kind, k, d in conditions]
    for chunk in progress(folder.iterate_pending(conditions, ids, 1), total=folder.count_pending(ids),
                          desc="masking conditions", enabled=show_progress):
        cid, (t, kind, k, d) = chunk[0]
        if kind == "none":
            mask = np.zeros((loaded.arch.n_layers, width), dtype=bool)
        else:
            mask = key_mask_for_k(rankings, k, width)
            if kind == "random":
                mask = matched_random_mask(mask, seed=cfg.seed + 1000 * d + k, per_layer=True, exclude_key=True)
        edits = mask_edits(mask)
        acc = task_accuracy(loaded, engine, tasks[t], edits, cfg.batch_size) if cfg.generate else None
        lp = gold_logprob(loaded, engine, tasks[t], edits, cfg.batch_size)
        folder.append_samples([{"id": cid, "task": t, "masking": kind, "k": k, "draw": d,
                                "n_masked": int(mask.sum()), "accuracy": acc, "gold_logprob": lp}])
    return finalize_masking(folder, cfg)


def finalize_masking(folder: RunFolder, cfg: MaskingConfig) -> RunFolder:
    """Curves per evaluation task (key vs random), results.json and the fig. 11-style plots."""
    from whitebox_eval.mui.plots import MaskingCurve, plot_masking_curves

    rows = list(folder.read_samples())
    metrics = (["accuracy"] if cfg.generate else []) + ["gold_logprob"]
    results: dict = {"source_task": cfg.source_task, "ks": list(cfg.ks), "curves": {}}
    panels: dict[str, dict[str, list[MaskingCurve]]] = {m: {} for m in metrics}
    for t in cfg.eval_tasks:
        base = [r for r in rows if r["task"] == t and r["masking"] == "none"]
        if not base:
            raise WhiteboxError("the run is not finished; rerun with --resume")
        entry: dict = {"baseline": {m: base[0][m] for m in metrics}, "key": [], "random": []}
        for kind in ("key", "random"):
            for k in cfg.ks:
                sel = [r for r in rows if r["task"] == t and r["masking"] == kind and r["k"] == int(k)]
                if not sel:
                    raise WhiteboxError("the run is not finished; rerun with --resume")
                entry[kind].append({"k": int(k), "n_masked": sel[0]["n_masked"],
                                    **{m: float(np.mean([r[m] for r in sel])) for m in metrics}})
        for m in metrics:
            drop_key = entry["baseline"][m] - float(np.mean([p[m] for p in entry["key"]]))
            drop_rand = entry["baseline"][m] - float(np.mean([p[m] for p in entry["random"]]))
            entry[f"mean_drop_key,{m}"] = drop_key
            entry[f"mean_drop_random,{m}"] = drop_rand
            entry[f"key_hurts_more,{m}"] = bool(drop_key > drop_rand)
            scale = 100.0 if m == "accuracy" else 1.0
            panels[m].setdefault("curves", [])
            for kind in ("key", "random"):
                panels[m]["curves"].append(MaskingCurve(
                    t + (" (random)" if kind == "random" else ""), [0] + [int(k) for k in cfg.ks],
                    [scale * entry["baseline"][m]] + [scale * p[m] for p in entry[kind]], random=kind == "random"))
        results["curves"][t] = entry
    results["headline"] = {f"drop_key_minus_random,{m},{t}": results["curves"][t][f"mean_drop_key,{m}"]
                           - results["curves"][t][f"mean_drop_random,{m}"] for m in metrics for t in cfg.eval_tasks}
    folder.save_results(results)
    for m in metrics:
        plot_masking_curves({f"masked: {cfg.source_task} key neurons ({cfg.model})": panels[m]["curves"]},
                            folder.plot_path(f"masking_{m}"), selected_k=1,
                            y_label="Accuracy (%)" if m == "accuracy" else "gold answer log-prob per token")
    return folder
