"""Truth probe on True/False heads' activations (paper 002 sec. 5 table 3, App. E).

Statements from SNLI (entailment = true, contradiction = false, neutral dropped) or
Geometry of Truth (``statement,label`` CSV) are put in the App. E feature templates

* SNLI: ``"{premise}. So {hypothesis}"``;
* GoT: ``"Please answer with Yes or No. Is it true that {statement}? Answer:"``;

zero-shot.  The feature of a head is its activation value over the rows of the
hypothesis / statement tokens (sec. 5: the largest weight to a token other than the
first) minus the weight to the first token (App. E "to obtain more distinctive
features"), maximised over those rows.  A Linear-ReLU-Linear MLP (hidden 32, Adam
lr 1e-3 without weight decay, batch 32, 30 epochs; table 11) is trained with k-fold
cross-validation (5 folds), each training fold split 3:1 into training and validation
sets, keeping the epoch with the best validation accuracy (App. E).

Choices where the paper is silent: folds are stratified by label; features are
standardised with the training fold's mean and standard deviation; the baseline is
the training part's majority label predicted for every held-out statement (paired
test against the probe, :class:`ProbeResult`); accuracy is pooled over the held-out
statements with a 95% interval, not the paper's mean +- sd over folds (kept too);
in the GoT template a leading "The"/"A"/"An" is lower-cased and a final period dropped.
"""

from __future__ import annotations

import csv
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from whitebox_eval.controls import Head
from whitebox_eval.datafiles import json_lines, open_text
from whitebox_eval.tasks.token_spans import char_offsets, span_tokens
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.heads import max_activation
from whitebox_eval.internals import Engine, batch_from_ids
from whitebox_eval.tasks.rows import Collector

SNLI_LABELS = {"entailment": 1, "contradiction": 0}
GOT_TEMPLATE = ("Please answer with Yes or No. Is it true that ", "? Answer:")


@dataclass(frozen=True)
class TruthStatement:
    """One probe input: the prompt, the character span whose rows give the features, the label."""

    text: str
    span: tuple[int, int]
    label: int
    source: str


def _got_statement(s: str) -> str:
    s = s.strip()
    if s.endswith("."):
        s = s[:-1]
    first, _, rest = s.partition(" ")
    if first in ("The", "A", "An") and rest:
        s = first.lower() + " " + rest
    return s


def got_statement(statement: str, label: int, source: str = "") -> TruthStatement:
    """A Geometry of Truth statement in the App. E template."""
    body = _got_statement(statement)
    text = GOT_TEMPLATE[0] + body + GOT_TEMPLATE[1]
    start = len(GOT_TEMPLATE[0])
    return TruthStatement(text, (start, start + len(body)), int(label), source)


def snli_statement(premise: str, hypothesis: str, label: int, source: str = "") -> TruthStatement:
    """An SNLI pair in the App. E template ``"{premise}. So {hypothesis}"``."""
    p = premise.strip().rstrip(".")
    h = hypothesis.strip()
    text = f"{p}. So {h}"
    start = len(p) + len(". So ")
    return TruthStatement(text, (start, start + len(h)), int(label), source)


def _subsample(rows: list[TruthStatement], limit: int | None, seed: int) -> list[TruthStatement]:
    if limit is None or limit >= len(rows):
        return rows
    rng = np.random.default_rng(seed)
    idx = sorted(rng.choice(len(rows), size=limit, replace=False).tolist())
    return [rows[i] for i in idx]


class TruthStatements(list):
    """The statements of one file, plus the malformed rows skipped (``bad_rows``, as
    ``path:line: reason``) when loading with ``on_bad_row="skip"``."""

    def __init__(self, rows=(), bad_rows=()) -> None:
        super().__init__(rows)
        self.bad_rows: list[str] = list(bad_rows)


def _finish(bad: Collector, path: Path, rows: list[TruthStatement], limit: int | None, seed: int,
            what: str) -> TruthStatements:
    """The loaded statements (``limit`` of them drawn with ``seed``); none at all raises."""
    if not rows:
        shown = f"; first problem: {bad.bad[0]}" if bad.bad else ""
        raise WhiteboxError(f"{path} has no {what}{shown}")
    kept = list(bad.finish(rows, what, path, None))  # warns once when rows were skipped
    return TruthStatements(_subsample(kept, limit, seed), [str(b) for b in bad.bad])


def _not_utf8(text: str) -> str | None:
    """The first undecodable byte of text read with ``errors="surrogateescape"``, or None."""
    bad = next((c for c in text if "\udc80" <= c <= "\udcff"), None)
    return None if bad is None else f"not UTF-8 text (byte 0x{ord(bad) - 0xDC00:02X}); re-save the file as UTF-8"


def load_geometry_of_truth(path: str | Path, *, limit: int | None = None, seed: int = 0,
                           on_bad_row: str = "error") -> TruthStatements:
    """Read a GoT CSV (columns ``statement`` and ``label`` in {0, 1}; others ignored).
    A malformed row (bad label, empty statement, bytes that are not UTF-8) stops with
    ``path:line`` or, with ``on_bad_row="skip"``, is dropped and listed in ``bad_rows``."""
    path = Path(path)
    if not path.is_file():
        raise WhiteboxError(f"no Geometry of Truth file at {path}; give a CSV with statement,label columns")
    bad = Collector(on_bad_row)
    rows = []
    with open_text(path) as f:
        f.reconfigure(errors="surrogateescape")  # a byte that is not UTF-8 is a bad row, not a bad file
        reader = csv.DictReader(f)
        try:
            fields = reader.fieldnames
        except csv.Error as exc:
            raise WhiteboxError(f"{path}:1: unreadable CSV header ({exc}); is it a text CSV file?") from None
        if fields is None or not {"statement", "label"} <= set(fields):
            shown = repr(fields)[:120]
            raise WhiteboxError(f"{path}:1: the header must have 'statement' and 'label' columns "
                                f"(found {shown}){'; ' + _not_utf8(str(fields)) if _not_utf8(str(fields)) else ''}")
        start = reader.line_num + 1
        try:
            for row in reader:
                line, start = start, reader.line_num + 1
                lab = (row.get("label") or "").strip()
                statement = row.get("statement") or ""
                problem = _not_utf8(statement + lab)
                if problem is None and lab not in ("0", "1", "True", "False", "true", "false"):
                    problem = f"label {lab!r} is not 0/1 (or True/False)"
                if problem is None and not statement.strip():
                    problem = "empty statement"
                if problem:
                    bad.report(path, line, problem)
                    continue
                rows.append(got_statement(statement, int(lab in ("1", "True", "true")), f"{path.name}:{line}"))
        except csv.Error as exc:
            bad.report(path, start, f"unreadable CSV ({exc}); the rest of the file was not read")
    return _finish(bad, path, rows, limit, seed, "statements")


def load_snli(path: str | Path, *, limit: int | None = None, seed: int = 0,
              on_bad_row: str = "error") -> TruthStatements:
    """Read SNLI JSON lines (``sentence1``, ``sentence2``, ``gold_label``); neutral and
    unlabeled (``-``) pairs are dropped, entailment = 1, contradiction = 0 (App. E).
    A malformed line (invalid JSON, a missing or null sentence) stops with ``path:line``
    or, with ``on_bad_row="skip"``, is dropped and listed in ``bad_rows``."""
    path = Path(path)
    if not path.is_file():
        raise WhiteboxError(f"no SNLI file at {path}; give a .jsonl file with sentence1, sentence2, gold_label")
    bad = Collector(on_bad_row)
    rows = []
    for line, rec in json_lines(path):
        if isinstance(rec, str):
            bad.report(path, line, rec)
            continue
        missing = [k for k in ("sentence1", "sentence2", "gold_label") if k not in rec]
        if missing:
            bad.report(path, line, f"missing {missing}; SNLI lines need sentence1, sentence2 and gold_label")
            continue
        if rec["gold_label"] not in SNLI_LABELS:
            continue
        wrong = [k for k in ("sentence1", "sentence2") if not isinstance(rec[k], str) or not rec[k].strip()]
        if wrong:
            what = ", ".join(f"{k} is {'empty' if isinstance(rec[k], str) else repr(rec[k])}" for k in wrong)
            bad.report(path, line, what + "; both sentences must be text")
            continue
        rows.append(snli_statement(rec["sentence1"], rec["sentence2"],
                                   SNLI_LABELS[rec["gold_label"]], f"{path.name}:{line}"))
    return _finish(bad, path, rows, limit, seed, "entailment/contradiction pairs")


def load_truth_statements(path: str | Path, *, limit: int | None = None, seed: int = 0,
                          on_bad_row: str = "error") -> TruthStatements:
    """By suffix: ``.csv`` = Geometry of Truth, ``.jsonl`` / ``.json`` = SNLI."""
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return load_geometry_of_truth(path, limit=limit, seed=seed, on_bad_row=on_bad_row)
    if suffix in (".jsonl", ".json"):
        return load_snli(path, limit=limit, seed=seed, on_bad_row=on_bad_row)
    raise WhiteboxError(f"cannot tell the format of {path}: use a Geometry of Truth .csv or an SNLI .jsonl")


# --------------------------------------------------------------------------- features


def _statement_positions(tokenizer: Any, st: TruthStatement) -> tuple[list[int], list[int]]:
    ids, offsets = char_offsets(tokenizer, st.text)
    pos = span_tokens(offsets, *st.span)
    if not pos:
        raise WhiteboxError(f"{st.source}: the statement maps to no token")
    return ids, pos


def truth_features(engine: Engine, statements: Sequence[TruthStatement], heads: Sequence[Head], *,
                   batch_size: int = 8, subtract_first: bool = True) -> np.ndarray:
    """[N, len(heads)] App. E features (see the module doc), one pass per batch."""
    if not heads:
        raise WhiteboxError("the truth probe needs at least one head (--heads LAYER.HEAD,...)")
    for l, h in heads:
        engine.arch.check_layer(l)
        engine.arch.check_head(h)
    layers = sorted({l for l, _ in heads})
    li = {l: i for i, l in enumerate(layers)}
    pad = engine.loaded.pad_id
    out = []
    for start in range(0, len(statements), batch_size):
        chunk = statements[start:start + batch_size]
        enc = [_statement_positions(engine.tokenizer, st) for st in chunk]
        batch = batch_from_ids([ids for ids, _ in enc], pad_id=pad).to(engine.loaded.device)
        act = max_activation(engine, batch, [p for _, p in enc], layers=layers, subtract_first=subtract_first)
        out.append(np.stack([act[:, li[l], h].numpy() for l, h in heads], axis=1))
    return np.concatenate(out).astype(np.float32)


# --------------------------------------------------------------------------- MLP probe


@dataclass(frozen=True)
class ProbeConfig:
    """Table 11 hyper-parameters and the App. E protocol."""

    hidden: int = 32
    lr: float = 1e-3
    batch_size: int = 32
    epochs: int = 30
    folds: int = 5
    val_fraction: float = 0.25
    seed: int = 0


@dataclass
class ProbeResult:
    """Held-out accuracy of the MLP probe against the majority baseline on the same statements.

    ``correct`` holds one value per held-out statement: 0/1 under k-fold CV (each
    statement is tested once, so the pooled accuracy gets a Wilson interval), or the
    share of the seeds that got it right under the SNLI split protocol (bootstrap
    interval over test statements).  ``majority_correct``: the training part's majority
    label predicted for every held-out statement.  ``fold_accuracies`` (per fold, or per
    seed) give the paper's mean +- sd (table 3), which is not an interval. ``tested``: the
    statement index of each held-out value (every statement under k-fold CV).
    """

    correct: np.ndarray
    majority_correct: np.ndarray
    fold_accuracies: list[float]
    n: int
    n_features: int
    protocol: str
    tested: np.ndarray | None = None

    def items(self, labels: np.ndarray) -> list[dict]:
        """One record per held-out statement: its index, gold label (of two) and whether the probe
        and the majority baseline got it right (a share of seeds under the split protocol)."""
        tested = np.arange(len(self.correct)) if self.tested is None else self.tested
        return [{"statement": int(i), "gold": int(labels[i]), "n_options": 2, "probe_correct": float(c),
                 "majority_correct": float(m)} for i, c, m in zip(tested, self.correct, self.majority_correct)]

    @property
    def mean(self) -> float:
        return float(np.mean(self.correct))

    @property
    def std(self) -> float:
        return float(np.std(self.fold_accuracies))

    @property
    def chance(self) -> float:
        """The majority baseline's accuracy on the held-out statements."""
        return float(np.mean(self.majority_correct))

    def to_dict(self) -> dict:
        from whitebox_eval import stats

        out: dict = {"n": self.n, "n_tested": int(len(self.correct)), "n_features": self.n_features,
                     "protocol": self.protocol, "fold_accuracies": list(self.fold_accuracies),
                     "accuracy_mean": float(np.mean(self.fold_accuracies)), "accuracy_std": self.std}
        binary = bool(np.all((self.correct == 0) | (self.correct == 1)))
        if binary:
            stats.add_proportion(out, "acc", self.correct)
            test = stats.mcnemar(self.correct, self.majority_correct)
        else:
            stats.add_mean(out, "acc", self.correct)
            test = stats.paired_bootstrap(self.correct, self.majority_correct)
        stats.add_proportion(out, "acc,majority", self.majority_correct)
        stats.add_paired(out, "probe_vs_majority", test)
        out["verdict"] = stats.verdict(test, "probe - majority baseline")
        out["chance_majority"] = out["acc,majority"]
        return out


def make_probe(n_features: int, hidden: int = 32, n_classes: int = 2) -> torch.nn.Module:
    """Linear-ReLU-Linear (table 11)."""
    return torch.nn.Sequential(torch.nn.Linear(n_features, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, n_classes))


def _accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((model(x).argmax(-1) == y).float().mean()) if len(y) else float("nan")


def train_probe(x_train: np.ndarray, y_train: np.ndarray, x_val: np.ndarray, y_val: np.ndarray,
                cfg: ProbeConfig = ProbeConfig(), seed: int = 0) -> torch.nn.Module:
    """Adam, ``cfg.epochs`` epochs; returns the model of the epoch with the best validation accuracy."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = make_probe(x_train.shape[1], cfg.hidden)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    xt, yt = torch.as_tensor(x_train, dtype=torch.float32), torch.as_tensor(y_train, dtype=torch.long)
    xv, yv = torch.as_tensor(x_val, dtype=torch.float32), torch.as_tensor(y_val, dtype=torch.long)
    best, best_state = -1.0, None
    for _ in range(cfg.epochs):
        model.train()
        perm = torch.randperm(len(xt), generator=g)
        for i in range(0, len(xt), cfg.batch_size):
            idx = perm[i:i + cfg.batch_size]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
            opt.step()
        model.eval()
        acc = _accuracy(model, xv, yv)
        if acc > best:
            best, best_state = acc, {k: v.clone() for k, v in model.state_dict().items()}
    if best_state is not None:
        model.load_state_dict(best_state)
    return model


@contextmanager
def _single_thread():
    """A 4-32-2 MLP trains faster on one CPU thread than on many (and shares the machine)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def stratified_folds(y: np.ndarray, k: int, seed: int) -> list[np.ndarray]:
    """``k`` test-index arrays, each label spread evenly over the folds."""
    rng = np.random.default_rng(seed)
    folds: list[list[int]] = [[] for _ in range(k)]
    for lab in np.unique(y):
        idx = np.flatnonzero(y == lab)
        rng.shuffle(idx)
        for j, i in enumerate(idx):
            folds[j % k].append(int(i))
    return [np.array(sorted(f)) for f in folds]


def _check_xy(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float32)
    y = np.asarray(y, dtype=np.int64)
    if x.ndim != 2 or len(x) != len(y):
        raise WhiteboxError(f"features must be [N, F] with one label each (got {x.shape} and {len(y)} labels)")
    if len(np.unique(y)) < 2:
        raise WhiteboxError("the probe needs both true and false statements")
    return x, y


def _fit_predict(x: np.ndarray, y: np.ndarray, tr: np.ndarray, val: np.ndarray, test: np.ndarray,
                 cfg: ProbeConfig, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train on ``tr`` (best epoch on ``val``), return (probe correct, majority correct) on ``test``."""
    mu, sd = x[tr].mean(0), x[tr].std(0) + 1e-6
    with _single_thread():
        model = train_probe((x[tr] - mu) / sd, y[tr], (x[val] - mu) / sd, y[val], cfg, seed=seed)
        with torch.no_grad():
            pred = model(torch.as_tensor((x[test] - mu) / sd)).argmax(-1).numpy()
    majority = int(np.bincount(y[tr], minlength=2).argmax())
    return (pred == y[test]).astype(np.float64), (y[test] == majority).astype(np.float64)


def cross_validate_probe(x: np.ndarray, y: np.ndarray, cfg: ProbeConfig = ProbeConfig()) -> ProbeResult:
    """App. E: k-fold CV, 3:1 train/validation split inside each training fold; every
    statement is tested once (pooled accuracy with a Wilson interval)."""
    x, y = _check_xy(x, y)
    if len(y) < 2 * cfg.folds:
        raise WhiteboxError(f"{len(y)} statements are too few for {cfg.folds}-fold cross-validation")
    correct = np.zeros(len(y))
    majority = np.zeros(len(y))
    accs = []
    rng = np.random.default_rng(cfg.seed)
    for f, test in enumerate(stratified_folds(y, cfg.folds, cfg.seed)):
        train = rng.permutation(np.setdiff1d(np.arange(len(y)), test))
        n_val = max(1, int(round(len(train) * cfg.val_fraction)))
        c, m = _fit_predict(x, y, train[n_val:], train[:n_val], test, cfg, cfg.seed + f)
        correct[test], majority[test] = c, m
        accs.append(float(c.mean()))
    return ProbeResult(correct, majority, accs, len(y), x.shape[1], f"{cfg.folds}-fold cross-validation",
                       np.arange(len(y)))


#: App. E's SNLI protocol: 3,000 training, 3,000 validation and 3,000 test statements, 5 seeds
SNLI_SPLIT = 3000
SNLI_SEEDS = 5


def split_probe(x: np.ndarray, y: np.ndarray, cfg: ProbeConfig = ProbeConfig(), *, n_each: int = SNLI_SPLIT,
                seeds: int = SNLI_SEEDS) -> ProbeResult:
    """App. E SNLI protocol: disjoint random train / validation / test sets of ``n_each``
    statements (drawn once with ``cfg.seed``; the paper samples them from SNLI's own three
    splits), the probe trained ``seeds`` times with different seeds; per test statement the
    share of seeds that classify it right (bootstrap interval over test statements)."""
    x, y = _check_xy(x, y)
    if len(y) < 3 * n_each:
        raise WhiteboxError(f"the split protocol needs {3 * n_each} statements; the file has {len(y)}")
    perm = np.random.default_rng(cfg.seed).permutation(len(y))
    tr, val, test = perm[:n_each], perm[n_each:2 * n_each], perm[2 * n_each:3 * n_each]
    runs = [_fit_predict(x, y, tr, val, test, cfg, cfg.seed + s) for s in range(seeds)]
    correct = np.mean([c for c, _ in runs], axis=0)
    return ProbeResult(correct, runs[0][1], [float(c.mean()) for c, _ in runs], len(y), x.shape[1],
                       f"train/val/test {n_each}/{n_each}/{n_each}, {seeds} seeds (App. E, SNLI)", test)
