"""Record, or compare against a recording, a fixed set of small studies of every suite.

A change that moves code between modules must leave every output where it was. This
script runs the same small studies on the bundled SmolLM2-135M (one thread, so every
batch is computed by the same kernels) and keeps their run folders; ``--compare`` runs
them again and reports, per study, whether results.json (without date, git and
version fields), samples.jsonl, config.yaml's study keys and every array are equal.

    python benchmarks/same_numbers.py record  --out /tmp/same/before
    python benchmarks/same_numbers.py record  --out /tmp/same/after
    python benchmarks/same_numbers.py compare /tmp/same/before /tmp/same/after

    python benchmarks/same_numbers.py record --out DIR --only mcqa_ssd,gar_evaluate
    python benchmarks/same_numbers.py record --out DIR --only mcqa_ssd --model MODEL_DIR   # another model

Studies (each a few minutes or less on 2 CPU cores): mcqa on SSD with every method
(ablation and cloze included), mcqa MMLU 5-shot ``--prompt lm-eval`` on the shared
sample, formats arithmetic 5-shot with sampling, mui arithmetic-gen and masking, gar
evaluate / intervene / truth-heads, span with reinforcement, and an SAE-scored mui study
(``--score sae`` on a seeded random TopK SAE this script writes in SAELens' layout, so the
SAE's code path is compared without training one). The shared samples are
looked for in ``$WHITEBOX_SHARED_DATASETS`` or ``../shared/datasets`` beside the clone;
a study whose data is missing is skipped with a printed reason.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODEL = "smollm2-135m"


def shared_datasets() -> Path | None:
    env = os.environ.get("WHITEBOX_SHARED_DATASETS")
    candidates = [Path(env)] if env else []
    candidates.append(HERE.parent.parent / "shared" / "datasets")
    return next((p for p in candidates if p.is_dir()), None)


def studies(data: Path | None, model: str = MODEL) -> dict[str, list[str] | str]:
    """name -> CLI arguments (a string: why the study cannot run here)."""
    s: dict[str, list[str] | str] = {
        "mcqa_ssd": ["mcqa", "--model", model, "--task", "ssd", "--limit", "48", "--min-val-items", "16",
                     "--methods", "baseline,qk,attention,lens,pride,pa,ablation,cloze", "--ablation-k", "2",
                     "--ablation-draws", "2", "--batch-size", "8"],
        "formats_arith": ["formats", "--model", model, "--task", "arithmetic", "--limit", "12", "--shots", "5",
                          "--n-samples", "3", "--max-new-tokens", "8", "--batch-size", "4"],
        "mui_arith": ["mui", "--model", model, "--task", "arithmetic-gen", "--limit", "8", "--max-new-tokens", "16",
                      "--batch-size", "4"],
        "mui_masking": ["mui", "masking", "--model", model, "--source-task", "arithmetic-gen", "--eval-task", "ssd",
                        "--ks", "1,4", "--limit", "6", "--random-draws", "2", "--max-new-tokens", "12",
                        "--batch-size", "4"],
        "gar_evaluate": ["gar", "--model", model, "--tasks", "all", "--limit", "2", "--batch-size", "8"],
        "gar_intervene": ["gar", "--mode", "intervene", "--model", model, "--tasks", "generation", "--limit", "2",
                          "--heads", "20.3,14.1", "--pattern", "V->E", "--batch-size", "8"],
        "gar_truth": ["gar", "--mode", "truth-heads", "--model", model, "--limit", "4", "--steps", "2",
                      "--candidates", "6", "--n-true", "2", "--n-false", "2", "--random-draws", "2",
                      "--batch-size", "8"],
        "span_reinforce": ["span", "--model", model, "--task", "string_reversal", "--split", "both", "--limit", "8",
                           "--reinforce", "--key-samples", "4", "--select-limit", "4", "--heads", "2",
                           "--values", "0.3", "--random-draws", "2", "--batch-size", "4"],
    }
    s["mui_sae"] = ["mui", "--model", model, "--task", "arithmetic-gen", "--limit", "6", "--max-new-tokens", "12",
                    "--batch-size", "4", "--score", "sae", "--sae", f"{SAE_LAYER}={{sae}}"]
    if data is None:
        s["mcqa_mmlu_lmeval"] = "no shared datasets folder (set WHITEBOX_SHARED_DATASETS)"
    else:
        s["mcqa_mmlu_lmeval"] = ["mcqa", "--model", model, "--task", f"mmlu={data / 'mmlu' / 'test'}",
                                 "--prompt", "lm-eval", "--shots", "5", "--demos-from", str(data / "mmlu" / "dev"),
                                 "--limit", "40", "--min-val-items", "10", "--methods", "baseline,qk,attention,lens",
                                 "--batch-size", "8"]
    return s


SAE_LAYER = 15


def write_sae(folder: Path, d_in: int = 576, d_sae: int = 512, k: int = 16, seed: int = 0) -> Path:
    """A seeded random TopK SAE in SAELens' layout (cfg.json + sae_weights.safetensors) at
    block SAE_LAYER's output residual; the same bytes on every machine (numpy's PCG64)."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w_dec = rng.standard_normal((d_sae, d_in)).astype(np.float32)
    w_dec /= np.linalg.norm(w_dec, axis=1, keepdims=True)
    save_file({"W_enc": np.ascontiguousarray(w_dec.T), "W_dec": w_dec,
               "b_enc": np.zeros(d_sae, np.float32), "b_dec": np.zeros(d_in, np.float32)},
              str(folder / "sae_weights.safetensors"))
    cfg = {"d_in": d_in, "d_sae": d_sae, "dtype": "float32", "device": "cpu", "apply_b_dec_to_input": True,
           "normalize_activations": "none", "metadata": {"hook_name": f"blocks.{SAE_LAYER}.hook_resid_post"},
           "k": k, "architecture": "topk"}
    (folder / "cfg.json").write_text(json.dumps(cfg))
    return folder


def record(out: Path, only: set[str] | None, model: str = MODEL) -> int:
    """Runs the studies into ``out``; returns how many failed."""
    out.mkdir(parents=True, exist_ok=True)
    sae = write_sae(out / "_sae")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "WHITEBOX_PROGRESS": "off"}
    timings = {}
    failed = 0
    for name, args in studies(shared_datasets(), model).items():
        if only and name not in only:
            continue
        if isinstance(args, str):
            print(f"{name}: skipped ({args})")
            continue
        args = [a.replace("{sae}", str(sae)) for a in args]
        cmd = [sys.executable, "-m", "whitebox_eval", *args, "--output", str(out), "--run-id", name]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        timings[name] = round(time.perf_counter() - t0, 1)
        (out / f"{name}.stdout").write_text(proc.stdout + "\n--- stderr\n" + proc.stderr)
        print(f"{name}: exit {proc.returncode} in {timings[name]} s")
        if proc.returncode != 0:
            failed += 1
            print(proc.stderr[-2000:])
    (out / "timings.json").write_text(json.dumps(timings, indent=1))
    return failed


VOLATILE = {"date", "git", "git_commit", "git_hash", "versions", "created", "finished", "start_time", "end_time",
            "total_evaluation_time_seconds", "timings", "elapsed_s", "wall_s"}


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _diff(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a:
                out.append(f"{path}/{k}: only after")
            elif k not in b:
                out.append(f"{path}/{k}: only before")
            else:
                out += _diff(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {json.dumps(a)[:120]} -> {json.dumps(b)[:120]}"]


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _float_gaps(a, b, path: str, gaps: dict[str, list[float]], other: list[str]) -> None:
    """Walk two JSON values: per field path (list indices written ``[]``) the largest absolute and
    relative difference of numbers that differ; any other difference (a prediction, a text, a key
    or a length) goes to ``other``."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            other.append(f"{path}: keys {sorted(set(a) ^ set(b))[:5]}")
        for k in set(a) & set(b):
            _float_gaps(a[k], b[k], f"{path}/{k}", gaps, other)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            other.append(f"{path}: {len(a)} vs {len(b)} entries")
        for x, y in zip(a, b):
            _float_gaps(x, y, f"{path}[]", gaps, other)
    elif _number(a) and _number(b) and (isinstance(a, float) or isinstance(b, float)):
        if a != b and not (a != a and b != b):
            d = abs(a - b)
            g = gaps.setdefault(path, [0.0, 0.0])
            g[0] = max(g[0], d)
            g[1] = max(g[1], d / max(abs(a), abs(b)))
    elif a != b:
        other.append(f"{path}: {json.dumps(a)[:80]} -> {json.dumps(b)[:80]}")


def float_summary(a: Path, b: Path) -> tuple[dict[str, list[float]], list[str]]:
    """Where two runs differ by floats only: per field of samples.jsonl and results.json, and per
    array, the largest absolute and relative difference; and every difference that is not a float."""
    gaps: dict[str, list[float]] = {}
    other: list[str] = []
    ra, rb = (_strip(json.loads((p / "results.json").read_text())) for p in (a, b))
    _float_gaps(ra, rb, "results.json", gaps, other)
    la, lb = ((p / "samples.jsonl").read_text().splitlines() for p in (a, b))
    if len(la) != len(lb):
        other.append(f"samples.jsonl: {len(la)} vs {len(lb)} lines")
    for x, y in zip(la, lb):
        if x != y:
            _float_gaps(json.loads(x), json.loads(y), "samples", gaps, other)
    for n in sorted((a / "arrays").glob("*.npy")) if (a / "arrays").is_dir() else []:
        m = b / "arrays" / n.name
        if not m.is_file():
            continue
        x, y = np.load(n), np.load(m)
        if x.shape != y.shape or x.dtype != y.dtype:
            other.append(f"array {n.name}: {x.shape} {x.dtype} vs {y.shape} {y.dtype}")
        elif x.dtype.kind == "f" and not np.array_equal(x, y, equal_nan=True):
            d = np.abs(x.astype(np.float64) - y.astype(np.float64))
            d = np.where(np.isnan(d), 0.0, d)
            scale = np.maximum(np.abs(x), np.abs(y)).astype(np.float64)
            gaps[f"array {n.name}"] = [float(d.max()), float((d / np.where(scale > 0, scale, 1)).max())]
        elif x.dtype.kind != "f" and not np.array_equal(x, y):
            other.append(f"array {n.name}: {int((x != y).sum())} entries differ")
    return gaps, other


def compare_run(a: Path, b: Path) -> list[str]:
    problems: list[str] = []
    ra, rb = (json.loads((p / "results.json").read_text()) for p in (a, b))
    problems += [f"results.json {d}" for d in _diff(_strip(ra), _strip(rb))]
    sa, sb = ((p / "samples.jsonl").read_bytes() for p in (a, b))
    if sa != sb:
        la, lb = sa.splitlines(), sb.splitlines()
        bad = [i for i, (x, y) in enumerate(zip(la, lb)) if x != y]
        problems.append(f"samples.jsonl differs: {len(la)} vs {len(lb)} lines, first differing line "
                        f"{bad[0] + 1 if bad else min(len(la), len(lb)) + 1}")
        for i in bad[:3]:
            problems += [f"  before: {la[i][:300]!r}", f"  after:  {lb[i][:300]!r}"]
    names = {p.relative_to(a / "arrays") for p in (a / "arrays").glob("*.npy")} if (a / "arrays").is_dir() else set()
    names_b = {p.relative_to(b / "arrays") for p in (b / "arrays").glob("*.npy")} if (b / "arrays").is_dir() else set()
    if names != names_b:
        problems.append(f"arrays differ in name: only before {sorted(map(str, names - names_b))}, "
                        f"only after {sorted(map(str, names_b - names))}")
    for n in sorted(names & names_b):
        x, y = np.load(a / "arrays" / n), np.load(b / "arrays" / n)
        if x.shape != y.shape or x.dtype != y.dtype or not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
            problems.append(f"array {n} differs ({x.shape} {x.dtype} vs {y.shape} {y.dtype})")
    return problems


def compare(before: Path, after: Path) -> int:
    failures = 0
    for run in sorted(p for p in before.iterdir() if (p / "results.json").is_file()):
        other = after / run.name
        if not (other / "results.json").is_file():
            print(f"{run.name}: not recorded after (not compared)")
            continue
        problems = compare_run(run, other)
        results = [p for p in problems if p.startswith("results.json")]
        added = sum(p.endswith("only after") for p in results)
        removed = sum(p.endswith("only before") for p in results)
        changed = len(results) - added - removed
        rest = [p for p in problems if not p.startswith("results.json")]
        print(f"{run.name}: {'same' if not problems else 'differs'}; results.json: {added} keys added, "
              f"{removed} removed, {changed} values changed; samples.jsonl and arrays: "
              f"{'same' if not rest else 'differ'}")
        if problems:
            gaps, nonfloat = float_summary(run, other)
            if not nonfloat:
                print("    floats only (every prediction, id and text the same); largest |diff| (relative) per field:")
                for k, (d, r) in sorted(gaps.items(), key=lambda kv: -kv[1][1]):
                    print(f"      {k}: {d:.3g} ({r:.3g})")
            else:
                print(f"    {len(nonfloat)} differences that are not floats, e.g. " + "; ".join(nonfloat[:4]))
                for p in [q for q in results if not q.endswith(("only after", "only before"))][:12] + rest[:8]:
                    print("   ", p)
        failures += bool(problems)
    return failures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("record")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--only", default="", help="comma list of study names")
    r.add_argument("--model", default=MODEL, help="the model of every study (default: %(default)s)")
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args()
    if args.what == "record":
        sys.exit(1 if record(args.out, set(filter(None, args.only.split(","))) or None, args.model) else 0)
    else:
        sys.exit(1 if compare(args.before, args.after) else 0)


if __name__ == "__main__":
    main()
