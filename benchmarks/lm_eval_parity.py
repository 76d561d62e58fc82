"""Freeze real lm-evaluation-harness numbers on the bundled SmolLM2-135M, for the parity test.

Runs lm-eval itself (an optional tool, never imported by the package or the tests)
offline on the first 30 items of MMLU (10 per subject of ``mmlu/test``, 0-shot and
5-shot with same-subject dev demonstrations), HellaSwag and ARC-Challenge from the
local samples, and writes

- ``tests/fixtures/lm_eval_parity.json``: per item lm-eval's exact context string,
  each choice's continuation, summed log-likelihood, is_greedy, gold, acc (acc_norm);
  per task lm-eval's aggregates and the raw ``results``/``versions``/``n-shot``/
  ``higher_is_better``/``n-samples``/``configs`` blocks;
- ``tests/fixtures/lm_eval_results/results_2026-11-23T00-00-00.000000.json``: the
  results file ``lm_eval --output_path`` writes (``EvaluationTracker``) for
  hellaswag + arc_challenge, under a fixed name.

Offline: each task's installed YAML is loaded by lm-eval's own TaskManager (the path
``--tasks NAME`` takes); only the data source changes (``dataset_path: json`` with
local JSON-lines files laid out like the hub dataset: cais/mmlu, Rowan/hellaswag,
allenai/ai2_arc), and splits the local files lack are set to null. Prompts, the
target delimiter, HellaSwag's ``process_docs``, few-shot sampling and metrics stay
lm-eval's own. Absolute paths of this machine (model folder, temp data) are replaced
by placeholders in what is written.

Run it with a Python that has lm-eval 0.4.13 (a separate venv; torch CPU build):

    /path/to/lmeval-venv/bin/python benchmarks/lm_eval_parity.py \\
        --project-python .venv/bin/python          # finds the bundled model's HF folder
    /path/to/lmeval-venv/bin/python benchmarks/lm_eval_parity.py --model-dir DIR

``--model-dir`` is the dequantized HF folder of the bundled SmolLM2 (whitebox_eval
caches it under ``~/.cache/whitebox_eval/gguf/``); without it the script asks the
project's Python (``--project-python``) for it via
``whitebox_eval.models.loading.resolve_source("smollm2-135m")``.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MMLU_SUBJECTS = ("high_school_geography", "marketing", "us_foreign_policy")
N_ITEMS = 30
RESULTS_NAME = "results_2026-11-23T00-00-00.000000.json"
MODEL_PLACEHOLDER = "<smollm2-135m HF folder>"
DATA_PLACEHOLDER = "<local data>"
LM_EVAL_PLACEHOLDER = "<lm_eval package>"
TARGET_DELIMITER = " "  # every task here keeps lm-eval's default target_delimiter


# ---------------------------------------------------------------- local data, hub layout

def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_jsonl(path: Path, n: int | None = None) -> list[dict]:
    rows = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
                if n is not None and len(rows) == n:
                    break
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return str(path)


def mmlu_rows(csv_path: Path, subject: str, n: int | None) -> list[dict]:
    """hendrycks CSV (question,A,B,C,D,letter; no header) -> cais/mmlu rows, unchanged text."""
    rows = []
    with csv_path.open(newline="", encoding="utf-8") as f:
        for rec in csv.reader(f):
            if not rec:
                continue
            q, a, b, c, d, ans = rec
            rows.append({"question": q, "subject": subject, "choices": [a, b, c, d],
                         "answer": "ABCD".index(ans.strip())})
            if n is not None and len(rows) == n:
                break
    return rows


def arc_rows(path: Path, n: int) -> list[dict]:
    """llm-foundry ARC jsonl (query "Question: ...", choices, gold) -> allenai/ai2_arc rows.

    The bare question is needed: lm-eval's template adds its own "Question: ...\\nAnswer:".
    llm-foundry keeps no ids or labels, so the id is the row index and labels are A, B, ...
    """
    out = []
    for i, r in enumerate(read_jsonl(path, n)):
        q = r["query"]
        if q.startswith("Question: "):
            q = q[len("Question: "):]
        if q.endswith("\nAnswer:"):
            q = q[: -len("\nAnswer:")]
        labels = [chr(ord("A") + k) for k in range(len(r["choices"]))]
        out.append({"id": f"row-{i}", "question": q,
                    "choices": {"text": list(r["choices"]), "label": labels},
                    "answerKey": labels[int(r["gold"])]})
    return out


def hellaswag_rows(path: Path, n: int) -> list[dict]:
    """Original HellaSwag jsonl -> Rowan/hellaswag rows (same fields; the hub's label is a string)."""
    keep = ("ind", "activity_label", "ctx_a", "ctx_b", "ctx", "endings", "source_id", "split", "split_type", "label")
    return [{k: (str(r[k]) if k == "label" else r[k]) for k in keep if k in r} for r in read_jsonl(path, n)]


def one_file(folder: Path, pattern: str) -> Path:
    files = sorted(folder.glob(pattern))
    if len(files) != 1:
        sys.exit(f"expected exactly one {pattern} in {folder}, found {[f.name for f in files]}")
    return files[0]


# ---------------------------------------------------------------- model folder

def find_model_dir(project_python: str) -> str:
    code = ("from whitebox_eval.models.loading import resolve_source; "
            "print(resolve_source('smollm2-135m')[0])")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    try:
        out = subprocess.run([project_python, "-c", code], env=env, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"could not ask {project_python} for the bundled model's folder ({e}); "
                 "pass --project-python (the project's venv Python) or --model-dir")
    folder = out.stdout.strip().splitlines()[-1]
    if not (Path(folder) / "config.json").is_file():
        sys.exit(f"{folder} has no config.json; pass --model-dir")
    return folder


# ---------------------------------------------------------------- lm-eval

def build_task(tm, name: str, overrides: dict):
    """lm-eval's own path for ``--tasks NAME`` (installed YAML + includes + !function),
    with ``overrides`` merged on top exactly as TaskManager merges config overrides."""
    entry = tm.task_index[name]
    return tm._factory.build(entry, overrides=overrides, registry=tm.task_index)


def local_source(data_files: dict[str, str], **splits) -> dict:
    return {"dataset_path": "json", "dataset_name": None,
            "dataset_kwargs": {"data_files": data_files}, **splits}


def evaluate(tasks_overrides: list[tuple[str, dict]], model_args: dict, batch_size: int,
             num_fewshot: int | None, tracker=None):
    import lm_eval
    from lm_eval.tasks import TaskManager

    tm = TaskManager(metadata=dict(model_args))  # the CLI merges model_args into task metadata
    tasks = [build_task(tm, name, ov) for name, ov in tasks_overrides]
    return lm_eval.simple_evaluate(
        model="hf", model_args=dict(model_args), tasks=tasks, num_fewshot=num_fewshot,
        batch_size=batch_size, device="cpu", log_samples=True, task_manager=tm,
        evaluation_tracker=tracker)


def sample_items(samples: list[dict], has_norm: bool, key_of) -> list[dict]:
    items = []
    for s in sorted(samples, key=lambda s: s["doc_id"]):
        args = [tuple(a) for a in s["arguments"]]
        contexts = {a[0] for a in args}
        assert len(contexts) == 1, "multiple_choice requests share one context"
        assert all(a[1].startswith(TARGET_DELIMITER) for a in args)
        resps = [tuple(r) for r in s["filtered_resps"]]
        item = {
            "key": key_of(s["doc_id"]),
            "doc_id": s["doc_id"],
            "context": args[0][0],
            "continuations": [a[1] for a in args],
            # doc_to_choice's strings: the continuation without the target delimiter " "
            "choices": [a[1][len(TARGET_DELIMITER):] for a in args],
            "loglik": [float(r[0]) for r in resps],
            "is_greedy": [bool(r[1]) for r in resps],
            "gold": int(s["target"]),
            "acc": float(s["acc"]),
        }
        if has_norm:
            item["acc_norm"] = float(s["acc_norm"])
        item["doc"] = s["doc"]
        item["doc_hash"], item["prompt_hash"] = s["doc_hash"], s["prompt_hash"]
        items.append(item)
    return items


def raw_blocks(results: dict, names: list[str]) -> dict:
    return {
        "results": {n: results["results"][n] for n in names},
        "versions": {n: results["versions"][n] for n in names},
        "n-shot": {n: results["n-shot"][n] for n in names},
        "higher_is_better": {n: results["higher_is_better"][n] for n in names},
        "n-samples": {n: results["n-samples"][n] for n in names},
        "configs": {n: results["configs"][n] for n in names},
    }


def task_summary(results: dict, name: str) -> dict:
    r = results["results"][name]
    agg = {k.split(",")[0]: v for k, v in r.items() if k != "alias" and k.endswith(",none")}
    return {"lm_eval_task": name, "aggregate": agg, "n-samples": results["n-samples"][name],
            "n-shot": results["n-shot"][name], "version": results["versions"][name]}


def sanitize(obj, replacements: dict[str, str]):
    """Replace this machine's paths (and the memory addresses in lm-eval's dumped
    ``<function f at 0x..>`` reprs) so the frozen files are the same on every rerun."""
    text = json.dumps(obj, ensure_ascii=False, default=str)
    for old, new in replacements.items():
        text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
    text = re.sub(r"(<function \w+) at 0x[0-9a-f]+>", r"\1>", text)
    return json.loads(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", type=Path, default=REPO.parent / "shared" / "datasets",
                    help="folder of the real-format samples (default: <repo>/../shared/datasets)")
    ap.add_argument("--model-dir", help="HF folder of the bundled smollm2-135m (dequantized GGUF cache)")
    ap.add_argument("--project-python", default=os.environ.get("WHITEBOX_PYTHON", str(REPO / ".venv" / "bin" / "python")),
                    help="the project's Python, asked for the model folder when --model-dir is absent")
    ap.add_argument("--batch-size", type=int, default=1,
                    help="lm-eval batch size (default 1, lm-eval's default: no padding; 8 moves log-likelihoods by up to ~1e-4)")
    ap.add_argument("--n-items", type=int, default=N_ITEMS,
                    help="items per task (a multiple of 3: MMLU takes n/3 per subject); the frozen fixture uses 30")
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "lm_eval_parity.json")
    ap.add_argument("--results-out", type=Path,
                    default=REPO / "tests" / "fixtures" / "lm_eval_results" / RESULTS_NAME)
    args = ap.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    tmp = Path(tempfile.mkdtemp(prefix="lm_eval_parity_"))
    os.environ["HF_DATASETS_CACHE"] = str(tmp / "hf_datasets_cache")

    import datasets
    import lm_eval  # noqa: F401
    import torch
    import transformers
    from importlib.metadata import version

    model_dir = args.model_dir or find_model_dir(args.project_python)
    model_args = {"pretrained": model_dir, "dtype": "float32"}
    ds = args.datasets.resolve()
    data = tmp / "data"

    # --- local files in hub layout
    hs_file = one_file(ds / "hellaswag", "*.jsonl")
    arc_file = one_file(ds / "arc", "*.jsonl")
    n_items = args.n_items
    if n_items % len(MMLU_SUBJECTS):
        ap.error(f"--n-items must be a multiple of {len(MMLU_SUBJECTS)}")
    hs = hellaswag_rows(hs_file, n_items)
    arc = arc_rows(arc_file, n_items)
    mmlu_test = {s: mmlu_rows(ds / "mmlu" / "test" / f"{s}_test.csv", s, n_items // len(MMLU_SUBJECTS)) for s in MMLU_SUBJECTS}
    mmlu_dev = {s: mmlu_rows(ds / "mmlu" / "dev" / f"{s}_dev.csv", s, None) for s in MMLU_SUBJECTS}
    source_files = [hs_file, arc_file] + [ds / "mmlu" / sp / f"{s}_{sp}.csv" for s in MMLU_SUBJECTS for sp in ("test", "dev")]

    hs_task = ("hellaswag", local_source({"validation": write_jsonl(data / "hellaswag" / "validation.jsonl", hs)},
                                         training_split=None))
    arc_task = ("arc_challenge", local_source({"test": write_jsonl(data / "arc" / "test.jsonl", arc)},
                                              training_split=None, validation_split=None))
    mmlu_tasks = [(f"mmlu_{s}", local_source({"test": write_jsonl(data / "mmlu" / s / "test.jsonl", mmlu_test[s]),
                                              "dev": write_jsonl(data / "mmlu" / s / "dev.jsonl", mmlu_dev[s])}))
                  for s in MMLU_SUBJECTS]

    from lm_eval.loggers import EvaluationTracker
    from lm_eval.models.huggingface import HFLM

    # --- run 1: hellaswag + arc_challenge, 0-shot, saved like `lm_eval --output_path`
    tracker = EvaluationTracker(output_path=str(tmp / "out"))
    res_ha = evaluate([hs_task, arc_task], model_args, args.batch_size, None, tracker)
    samples_ha = res_ha.pop("samples")
    tracker.save_results_aggregated(results=res_ha, samples=samples_ha)
    written = sorted((tmp / "out").rglob("results_*.json"))
    assert len(written) == 1, written
    # --- runs 2 and 3: MMLU subjects 0-shot, then 5-shot (dev split, first_n sampler)
    res_m0 = evaluate(mmlu_tasks, model_args, args.batch_size, 0)
    res_m5 = evaluate(mmlu_tasks, model_args, args.batch_size, 5)

    # lm-eval's own tokenization of one pair (context+continuation -> token ids), and whether a BOS is added
    lm = HFLM(pretrained=model_dir, dtype="float32", device="cpu", batch_size=1)
    s0 = sorted(samples_ha["hellaswag"], key=lambda s: s["doc_id"])[0]
    ctx_enc, cont_enc = lm._encode_pair(*s0["arguments"][0])
    bos = lm.tokenizer.bos_token_id
    tokenization = {
        "example": "hellaswag doc_id 0, choice 0",
        "context_token_ids": ctx_enc, "continuation_token_ids": cont_enc,
        "bos_token_id": bos, "bos_added": bool(bos is not None and ctx_enc[:1] == [bos]),
        "add_bos_token_arg": lm.add_bos_token,
    }
    del lm

    from lm_eval.utils import sanitize_model_name

    replacements = {str(tmp / "data"): DATA_PLACEHOLDER, model_dir: MODEL_PLACEHOLDER,
                    sanitize_model_name(model_dir): sanitize_model_name(MODEL_PLACEHOLDER),
                    str(Path(lm_eval.__file__).parent): LM_EVAL_PLACEHOLDER, str(tmp): "<tmp>"}

    def block(results, samples, names, key_of, has_norm, **extra):
        items = [it for n in names for it in sample_items(samples[n], has_norm, key_of(n))]
        assert len(items) == n_items, (names, len(items))
        out = {**extra, "lm_eval_tasks": {n: task_summary(results, n) for n in names},
               "metrics": ["acc", "acc_norm"] if has_norm else ["acc"]}
        out["mean_over_items"] = {m: sum(it[m] for it in items) / len(items) for m in out["metrics"]}
        for n in names:
            assert results["configs"][n]["target_delimiter"] == TARGET_DELIMITER, n
        if len(names) == 1:  # one lm-eval task: its aggregate is the mean over these items
            for m in out["metrics"]:
                assert abs(results["results"][names[0]][f"{m},none"] - out["mean_over_items"][m]) < 1e-12
        out["raw"] = raw_blocks(results, names)
        out["items"] = items
        return out

    mmlu_key = lambda n: (lambda i: {"subject": n[len("mmlu_"):], "row": i})  # noqa: E731
    fixture_tasks = {
        "hellaswag": block(res_ha, samples_ha, ["hellaswag"],
                           lambda n: (lambda i: {"row": i, "ind": hs[i]["ind"]}), True,
                           source=f"hellaswag/{hs_file.name}", split="validation", num_fewshot=0,
                           key="row = 0-based row of the source file; ind = its 'ind' field"),
        "arc_challenge": block(res_ha, samples_ha, ["arc_challenge"], lambda n: (lambda i: {"row": i}), True,
                               source=f"arc/{arc_file.name}", split="test", num_fewshot=0,
                               key="row = 0-based row of the source file"),
        "mmlu": block(res_m0, res_m0["samples"], [t for t, _ in mmlu_tasks], mmlu_key, False,
                      source="mmlu/test/<subject>_test.csv", split="test", num_fewshot=0,
                      key="subject, row = 0-based row of mmlu/test/<subject>_test.csv"),
        "mmlu_5shot": block(res_m5, res_m5["samples"], [t for t, _ in mmlu_tasks], mmlu_key, False,
                            source="mmlu/test/<subject>_test.csv; demos mmlu/dev/<subject>_dev.csv",
                            split="test", num_fewshot=5, fewshot_split="dev", fewshot_sampler="first_n",
                            fewshot_dev_rows=[0, 1, 2, 3, 4],
                            fewshot_docs=[d for s_ in MMLU_SUBJECTS for d in mmlu_dev[s_][:5]],
                            key="subject, row = 0-based row of mmlu/test/<subject>_test.csv"),
    }
    # the 5-shot demonstrations are the first five dev rows of the same subject, in order
    for it in fixture_tasks["mmlu_5shot"]["items"]:
        pos = [it["context"].find(d["question"].strip() + "\nA. ") for d in mmlu_dev[it["key"]["subject"]][:5]]
        assert all(p >= 0 for p in pos) and pos == sorted(pos), (it["key"], pos)

    cmd = shlex.join(["python", *sys.argv])
    header = {
        "what": "lm-evaluation-harness per-item log-likelihoods and metrics, frozen for the parity test (issue 15)",
        "lm_eval_version": version("lm_eval"), "transformers_version": transformers.__version__,
        "torch_version": torch.__version__, "datasets_version": datasets.__version__,
        "python_version": platform.python_version(),
        "model": "smollm2-135m (SmolLM2-135M-Instruct Q4_1 GGUF, dequantized to float32 by whitebox_eval)",
        "model_folder": Path(model_dir).name, "model_args": sanitize(model_args, replacements),
        "dtype": "float32", "device": "cpu", "batch_size": args.batch_size, "apply_chat_template": False,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": cmd,
        "source_files_sha256": {str(p.relative_to(ds)): sha256(p) for p in source_files},
        "tokenization": tokenization,
        "results_file": f"tests/fixtures/lm_eval_results/{RESULTS_NAME} (hellaswag + arc_challenge, "
                        "written by lm-eval's EvaluationTracker.save_results_aggregated)",
        "placeholders": {DATA_PLACEHOLDER: "temporary folder of hub-layout JSON-lines files",
                         MODEL_PLACEHOLDER: "the model folder passed as pretrained=",
                         LM_EVAL_PLACEHOLDER: "the installed lm_eval package folder"},
    }
    fixture = sanitize({"header": header, "tasks": fixture_tasks}, replacements)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    # the lm-eval results file, as written by EvaluationTracker, with machine paths replaced
    results_file = sanitize(json.loads(written[0].read_text(encoding="utf-8")), replacements)
    args.results_out.parent.mkdir(parents=True, exist_ok=True)
    args.results_out.write_text(json.dumps(results_file, indent=2, ensure_ascii=False), encoding="utf-8")

    for name, b in fixture_tasks.items():
        print(name, {n: s["aggregate"] for n, s in b["lm_eval_tasks"].items()}, "mean over items:", b["mean_over_items"])
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes) and {args.results_out}")


if __name__ == "__main__":
    main()
