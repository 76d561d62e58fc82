"""Fine-tuning pieces the suites share: a loss on chosen target rows, AdamW through float32
master copies, the one training loop (:func:`train_rows`, resumable from a saved state), and a
cache of trained weights that two runs (or two experiments with the same training) share
instead of training twice.

The loss is the next-token cross-entropy at given rows only (003 App. E: the target tokens;
001 App. A.6: the answer after the test prompt), logits computed at those rows alone.
Trained weights are kept under ``<cache root>/finetuned/<kind>/<label>-<digest>/`` (the
cache root is ``$WHITEBOX_EVAL_CACHE``, as for dequantised GGUF models), the digest a
SHA-256 of everything that sets them: the model and its weights' fingerprint, the
training data and the optimiser settings. A folder is written under a ``.partial`` name
and renamed into place, with an exclusive lock, so a killed run leaves no half entry.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models.loading import cache_root
from whitebox_eval.models.cache_entries import fill_once

WEIGHTS_FILE = "model.safetensors"
TRAINED_FILE = "trained.json"
"""What a fine-tuning run folder holds beside its weights once they are complete (its record)."""
KEY_FILE = "key.json"
INFO_FILE = "info.json"
#: trainings run in this process (a test reads it to see that a second call trained nothing)
TRAINED: list[str] = []


# ------------------------------------------------------------------ loss and optimiser


@dataclass
class RowBatch:
    """Right-padded inputs and the rows whose next token is scored (``weights`` 0 on padding)."""

    input_ids: torch.Tensor  # [B, S]
    attention_mask: torch.Tensor  # [B, S]
    position_ids: torch.Tensor  # [B, S]
    rows: torch.Tensor  # [B, P] prediction rows (padded by repeating the last)
    targets: torch.Tensor  # [B, P] target ids at those rows
    weights: torch.Tensor  # [B, P] 1 for a real target row, 0 for padding


def row_batch(sequences: Sequence[tuple[Sequence[int], Sequence[int], Sequence[int]]], pad_id: int = 0) -> RowBatch:
    """Right-pad ``(input_ids, prediction_rows, target_ids)`` triples (position ids 0..n-1 per
    sequence, padding masked as keys and never scored, so no query row is fully masked)."""
    if not sequences:
        raise WhiteboxError("a training batch needs at least one example")
    s = max(len(ids) for ids, _, _ in sequences)
    p = max(len(rows) for _, rows, _ in sequences)
    if p == 0:
        raise WhiteboxError("the examples have no target tokens to train on")
    b = len(sequences)
    ids_t = torch.full((b, s), pad_id, dtype=torch.long)
    mask = torch.zeros((b, s), dtype=torch.long)
    rows_t = torch.zeros((b, p), dtype=torch.long)
    targets = torch.zeros((b, p), dtype=torch.long)
    weights = torch.zeros((b, p), dtype=torch.float32)
    for i, (ids, rows, tgt) in enumerate(sequences):
        n, k = len(ids), len(rows)
        if k != len(tgt) or (k and (min(rows) < 0 or max(rows) >= n)):
            raise WhiteboxError("each prediction row needs one target id, inside its sequence")
        ids_t[i, :n] = torch.as_tensor(list(ids), dtype=torch.long)
        mask[i, :n] = 1
        if k:
            pr = torch.as_tensor(list(rows), dtype=torch.long)
            rows_t[i, :k], rows_t[i, k:] = pr, pr[-1]
            tg = torch.as_tensor(list(tgt), dtype=torch.long)
            targets[i, :k], targets[i, k:] = tg, tg[-1]
            weights[i, :k] = 1.0
    positions = torch.arange(s).unsqueeze(0).expand(b, -1).clone()
    return RowBatch(ids_t, mask, positions, rows_t, targets, weights)


def row_outputs(model, batch: RowBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """Per target row: the cross-entropy of its target id and the model's argmax id (``[B, P]``
    each; the hidden states are gathered before the unembedding, so the vocabulary projection
    runs on those rows only)."""
    device = next(model.parameters()).device
    out = model.base_model(input_ids=batch.input_ids.to(device), attention_mask=batch.attention_mask.to(device),
                           position_ids=batch.position_ids.to(device), use_cache=False)
    hidden = out.last_hidden_state  # [B, S, D]
    rows = batch.rows.to(device)
    picked = hidden.gather(1, rows.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))
    logits = model.get_output_embeddings()(picked).float()
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    nll = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.targets.to(device).flatten(),
                                            reduction="none").view_as(batch.weights)
    return nll, logits.argmax(-1)


def row_loss(model, batch: RowBatch) -> torch.Tensor:
    """Mean cross-entropy of the target ids at the batch's rows (:func:`row_outputs`)."""
    nll, _ = row_outputs(model, batch)
    w = batch.weights.to(nll.device)
    return (nll * w).sum() / w.sum()


def adamw(params, learning_rate: float, betas: Sequence[float], weight_decay: float) -> torch.optim.Optimizer:
    """AdamW, fused where torch supports it for these parameters (same update, ~8x faster on
    CPU than the per-tensor loop), else the default implementation."""
    kw = dict(lr=learning_rate, betas=tuple(betas), weight_decay=weight_decay)
    if all(p.dtype in (torch.float32, torch.float16, torch.bfloat16) for p in params):
        try:
            return torch.optim.AdamW(params, fused=True, **kw)
        except (RuntimeError, TypeError, ValueError):
            pass
    return torch.optim.AdamW(params, **kw)


class MasterWeights:
    """float32 master copies of a model's bf16/fp16 parameters (mixed-precision training).

    AdamW steps the float32 copies and each step is rounded into the model afterwards: an update
    far below a bf16 weight's spacing (003 App. E's lr 5e-6 against weights near 0.1, spacing ~5e-4)
    accumulates in the copy until it moves the weight, where stepping the bf16 weights directly
    would round every one of them away. float32 parameters are stepped as they are."""

    HALF = (torch.bfloat16, torch.float16)

    def __init__(self, params: Sequence[torch.Tensor]):
        self.pairs = [(p, p.detach().float().requires_grad_(True) if p.dtype in self.HALF else p) for p in params]

    @property
    def params(self) -> list[torch.Tensor]:
        """What the optimizer steps: the masters (and the float32 parameters themselves)."""
        return [m for _, m in self.pairs]

    def grads_to_masters(self) -> None:
        for p, m in self.pairs:
            if m is not p:
                m.grad = None if p.grad is None else p.grad.float()
                p.grad = None

    def masters_to_model(self) -> None:
        with torch.no_grad():
            for p, m in self.pairs:
                if m is not p:
                    p.copy_(m)


# ------------------------------------------------------------------------ the loop


@dataclass(frozen=True)
class Recipe:
    """What sets a training's weights: AdamW's settings, the batch size, the number of optimizer
    steps, ``seed`` (torch's generator, set before training) and ``order_key`` (the data order's
    ``random.Random``, reshuffled at every epoch's first step)."""

    learning_rate: float
    betas: tuple[float, float]
    weight_decay: float
    batch_size: int
    steps: int
    seed: int
    order_key: str
    grad_clip: float | None = None


@dataclass
class LoopResult:
    """What the loop did: the loss of every step (those before a resume included), the steps
    and examples seen, the seconds this call took, whether ``after_step`` stopped it."""

    losses: list[float]
    steps: int
    seen: int
    seconds: float
    stopped: bool = False


def state_bytes(state: Mapping[str, Any]) -> bytes:
    """A loop state as bytes (torch's format, tensors and plain values only)."""
    buf = io.BytesIO()
    torch.save(dict(state), buf)
    return buf.getvalue()


def state_from_bytes(data: bytes) -> dict[str, Any]:
    """A loop state written by :func:`state_bytes` (read with torch's weights-only loader)."""
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unreadable state is the same fault
        raise WhiteboxError(f"the saved training state is unreadable ({type(e).__name__}); start the run afresh") from None


def _random_state(state) -> tuple:
    version, internal, gauss = state
    return (int(version), tuple(int(x) for x in internal), gauss)


def train_rows(lm, examples: Sequence[tuple[Sequence[int], Sequence[int], Sequence[int]]], recipe: Recipe, *,
               after_step: Callable[[int, float], bool | None] | None = None,
               save_state: Callable[[bytes], None] | None = None, save_every: int = 0,
               start: bytes | None = None, extra: dict[str, Any] | None = None,
               bar: Callable[[range], Any] = lambda steps: steps) -> LoopResult:
    """Train ``lm.model`` in place on ``(ids, prediction rows, target ids)`` examples: the loss at
    the rows (:func:`row_loss`), AdamW through float32 masters (:class:`MasterWeights`), batches
    of ``recipe.batch_size`` in an order reshuffled every epoch, ``recipe.steps`` steps.

    ``after_step(step, loss)`` runs after each step (checkpoints, evaluations); a true return
    stops the loop. With ``save_state``, every ``save_every`` steps (and at a stop) the state
    -- masters, optimizer moments, step, the data order and both generators, the losses and
    ``extra`` (the caller's own history, updated in place) -- is given to it as bytes;
    ``start`` (such bytes) continues from there to the same weights as an uninterrupted run.
    The model is left in eval mode."""
    if not examples:
        raise WhiteboxError("no training examples")
    if recipe.batch_size < 1 or recipe.steps < 0 or recipe.learning_rate <= 0:
        raise WhiteboxError("a training needs batch size >= 1, steps >= 0 and a positive learning rate")
    model = lm.model
    torch.manual_seed(recipe.seed)
    masters = MasterWeights([p for p in model.parameters() if p.requires_grad])
    params = masters.params
    opt = adamw(params, recipe.learning_rate, recipe.betas, recipe.weight_decay)
    rng = random.Random(recipe.order_key)
    per_epoch = -(-len(examples) // recipe.batch_size)
    losses: list[float] = []
    order: list[int] = []
    step = seen = 0
    stopped = False
    extra = {} if extra is None else extra
    if start is not None:
        state = state_from_bytes(start)
        if len(state["masters"]) != len(params) or state["recipe"] != repr(recipe):
            raise WhiteboxError("the saved training state is from another model or recipe; start the run afresh")
        with torch.no_grad():
            for m, saved in zip(params, state["masters"]):
                m.copy_(saved)
        masters.masters_to_model()
        opt.load_state_dict(state["optimizer"])
        rng.setstate(_random_state(state["rng"]))
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        step, seen, order = int(state["step"]), int(state["seen"]), [int(i) for i in state["order"]]
        losses = [float(x) for x in state["losses"]]
        extra.clear()
        extra.update(json.loads(state["extra"]))
        stopped = bool(state["stopped"])

    def save() -> None:
        if save_state is not None:
            save_state(state_bytes({
                "recipe": repr(recipe), "step": step, "seen": seen, "order": order, "losses": losses,
                "masters": [m.detach().clone() for m in params], "optimizer": opt.state_dict(),
                "rng": rng.getstate(), "torch_rng": torch.get_rng_state(), "extra": json.dumps(extra),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
                "stopped": stopped}))

    began = time.perf_counter()
    model.train()
    try:
        for step in bar(range(step + 1, (step if stopped else recipe.steps) + 1)):
            if (step - 1) % per_epoch == 0:
                order = list(range(len(examples)))
                rng.shuffle(order)
            i = (step - 1) % per_epoch * recipe.batch_size
            chunk = [examples[j] for j in order[i:i + recipe.batch_size]]
            loss = row_loss(model, row_batch(chunk, lm.pad_id))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            masters.grads_to_masters()
            if recipe.grad_clip:
                torch.nn.utils.clip_grad_norm_(params, recipe.grad_clip)
            opt.step()
            masters.masters_to_model()
            seen += len(chunk)
            losses.append(float(loss.detach()))
            stopped = bool(after_step(step, losses[-1])) if after_step is not None else False
            if stopped or (save_every and step % save_every == 0):
                save()
            if stopped:
                break
    finally:
        model.eval()
        opt.zero_grad(set_to_none=True)
        model.zero_grad(set_to_none=True)
    return LoopResult(losses, len(losses), seen, time.perf_counter() - began, stopped)


@contextmanager
def kept_weights(model) -> Iterator[None]:
    """Put ``model``'s weights back as they were when the block ends (a model shared by
    several studies, e.g. reproduce's children, is trained in place for one of them)."""
    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    try:
        yield
    finally:
        with torch.no_grad():
            model.load_state_dict(saved)
        model.eval()


def save_weights(lm, path: str | Path) -> Path:
    """Write ``lm``'s model (safetensors) and tokenizer as a Hugging Face folder that
    ``load_model(path)`` loads again."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    lm.model.save_pretrained(path, safe_serialization=True)
    tok = getattr(lm, "tokenizer", None)
    if tok is not None and hasattr(tok, "save_pretrained"):
        tok.save_pretrained(path)
    return path


def load_weights(model, path: str | Path) -> None:
    """Load weights written by :func:`save_weights` into ``model`` in place. Weights tied to
    the input embeddings (the unembedding of tied models) may be absent from the file; any
    other missing or unexpected key is an error."""
    from safetensors.torch import load_file

    from whitebox_eval.models.loading import check_safetensors

    file = Path(path) / WEIGHTS_FILE
    if not file.is_file():
        raise WhiteboxError(f"no checkpoint weights at {file}; fine-tune again or give the folder save_weights wrote")
    check_safetensors(file)
    state = load_file(str(file), device=str(next(model.parameters()).device))
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {k for k in missing if k.endswith("lm_head.weight")} if getattr(
        model.config, "tie_word_embeddings", False) else set()
    if unexpected or set(missing) - tied:
        raise WhiteboxError(f"weights {file} do not fit this model: missing "
                            f"{sorted(set(missing) - tied)[:5]}, unexpected {sorted(unexpected)[:5]}")
    if tied:
        model.tie_weights()


# ------------------------------------------------------------------------------- cache


def weights_fingerprint(model) -> str:
    """A short digest of every parameter's name, shape, dtype and float64 sum and sum of
    squares: two models that differ in any weight almost surely differ here."""
    h = hashlib.sha256()
    with torch.no_grad():
        for name, p in sorted(model.state_dict().items()):
            x = p.detach().double()
            h.update(f"{name}|{tuple(p.shape)}|{p.dtype}|{float(x.sum()):.10e}|{float((x * x).sum()):.10e}".encode())
    return h.hexdigest()[:16]


def weights_file_sha256(folder: str | Path) -> str:
    """SHA-256 of a folder's ``model.safetensors`` (the fingerprint of a trained model's weights)."""
    h = hashlib.sha256()
    with (Path(folder) / WEIGHTS_FILE).open("rb") as f:
        for block in iter(lambda: f.read(1 << 23), b""):
            h.update(block)
    return h.hexdigest()


def trained_model_record(spec: Any) -> dict[str, Any]:
    """config.yaml's ``model_weights`` for a model that is a fine-tuning's run folder: the producer's
    run id and the weights' SHA-256, read from the file now and checked against the producer's record
    (a consumer never mixes with weights trained elsewhere). Empty for any other model."""
    if not isinstance(spec, str) or not spec:
        return {}
    path = Path(spec).expanduser()
    marker = path / TRAINED_FILE
    if not marker.is_file() or not (path / WEIGHTS_FILE).is_file():
        return {}
    info = json.loads(marker.read_text(encoding="utf-8"))
    sha = weights_file_sha256(path)
    if sha != info.get("sha256"):
        raise WhiteboxError(f"{path / WEIGHTS_FILE} is not the file its fine-tuning wrote (SHA-256 {sha[:12]}..., "
                            f"recorded {str(info.get('sha256'))[:12]}...); train it again or restore the folder")
    return {"model_weights": {"producer": info.get("run_id"), "sha256": sha,
                              **({"step": info["step"]} if "step" in info else {})}}


def data_digest(items: Sequence[Any]) -> str:
    """SHA-256 of training data given as JSON-able items (token ids, texts)."""
    h = hashlib.sha256()
    for it in items:
        h.update(json.dumps(it, sort_keys=True, default=str).encode())
        h.update(b"\n")
    return h.hexdigest()


def _digest(key: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-.")[-48:] or "model"


@dataclass(frozen=True)
class Trained:
    """A cache entry: its folder, whether it was there before this call, and its info."""

    path: Path
    reused: bool
    info: dict[str, Any]
    digest: str


def cache_folder(kind: str, key: Mapping[str, Any], label: str) -> Path:
    """The entry of ``key`` (``kind``: the suite's name for its trainings)."""
    return cache_root() / "finetuned" / kind / f"{_slug(label)}-{_digest(key)}"


def _complete(path: Path) -> bool:
    return (path / KEY_FILE).is_file() and (path / INFO_FILE).is_file()


def trained(kind: str, key: Mapping[str, Any], label: str, train: Callable[[Path], Mapping[str, Any]],
            log: Callable[[str], None] = lambda line: None) -> Trained:
    """The cached training of ``key``, trained now by ``train(folder)`` when absent.

    ``train`` writes its checkpoints and files into the folder it is given and returns a
    JSON-able summary (kept as ``info.json``); nothing it wrote stays if it raises.
    """
    target = cache_folder(kind, key, label)
    digest = target.name.rsplit("-", 1)[-1]
    built: dict[str, Any] = {}

    def build(tmp: Path) -> None:
        log(f"fine-tuning (cache entry {target})")
        built.update(train(tmp))
        (tmp / INFO_FILE).write_text(json.dumps(built, indent=1, default=str) + "\n", encoding="utf-8")
        (tmp / KEY_FILE).write_text(json.dumps(dict(key), indent=1, sort_keys=True, default=str) + "\n",
                                    encoding="utf-8")

    if not fill_once(target, _complete, build):
        log(f"fine-tuned weights reused from the cache: {target}")
        return Trained(target, True, json.loads((target / INFO_FILE).read_text(encoding="utf-8")), digest)
    TRAINED.append(str(target))
    return Trained(target, False, built, digest)
