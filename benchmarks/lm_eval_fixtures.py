"""Freeze lm-evaluation-harness 0.4.13's own prompts, log-likelihoods and metrics for two
parity tests of the multiple-choice route (``--task lm-eval:NAME`` and ``--prompt lm-eval``).

``--part tasks`` writes ``tests/fixtures/lm_eval_tasks/``: five lm-eval tasks we have no
loader for, each a different shape of lm-eval request (openbookqa: a bare question, test
split, k demonstrations drawn per item; sciq: a support passage, fixed target index;
piqa: two choices, no test split, so lm-eval draws k + 1 and drops the evaluated document;
commonsense_qa: five lettered options, the letters scored; winogrande: partial evaluation,
one context per choice and one shared continuation). The data are synthetic rows in each
task's hub schema (``data/<task>/<split>.jsonl``, written here, deterministic), run 0-shot
and 3-shot; ``lm_eval_tasks.json`` keeps every request's context and continuation, the
summed log-likelihoods, is_greedy and lm-eval's per-item metrics.

``--part whole`` writes ``tests/fixtures/lm_eval_whole_files.json``: the shared samples in
full, not first rows — ARC-Challenge (all 300 rows) and HellaSwag (all 200) 0-shot, MMLU's
three shared subjects 0- and 5-shot (every test row), and lm-eval's leaderboard shot
counts, ARC 25-shot and HellaSwag 10-shot, where the samples' first rows play the training
split (``TRAIN_ROWS``) and the rest are evaluated. Per item: the sha256 of lm-eval's context
(``prompt_hash``, lm-eval's own ``hash_string``), the continuations, log-likelihoods, acc
and acc_norm.

Run with a Python that has lm-eval 0.4.13 (a separate venv, torch CPU build first):

    /path/to/lmeval-venv/bin/python benchmarks/lm_eval_fixtures.py --part tasks
    /path/to/lmeval-venv/bin/python benchmarks/lm_eval_fixtures.py --part whole
    ONLY=hellaswag/10,arc_challenge/25 LIMIT=40 .../python benchmarks/lm_eval_fixtures.py --part whole

Every prompt of every setting is written first (no model runs); then lm-eval's scored runs,
the cheapest first, each kept as soon as it ends; ``ONLY`` picks settings and ``LIMIT``
scores only the first N documents of each task (``--limit N``: their contexts are those
of the full run), where the long k-shot contexts would take hours on 2 shared cores.

The data source is changed as in ``benchmarks/lm_eval_parity.py`` (``dataset_path: json``
with local files; splits the files lack set to null); everything else is lm-eval's own.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lm_eval_parity import (  # noqa: E402
    DATA_PLACEHOLDER, MODEL_PLACEHOLDER, REPO, arc_rows, build_task, find_model_dir, hellaswag_rows, local_source,
    mmlu_rows, sanitize, sha256, write_jsonl)

MMLU_SUBJECTS = ("high_school_geography", "marketing", "us_foreign_policy")
TRAIN_ROWS = {"arc_challenge": 50, "hellaswag": 40}  # first rows used as the training split for k-shot
LEADERBOARD_SHOTS = {"arc_challenge": 25, "hellaswag": 10}
TASK_SHOTS = 3
TASKS_DIR = REPO / "tests" / "fixtures" / "lm_eval_tasks"
WHOLE_FILE = REPO / "tests" / "fixtures" / "lm_eval_whole_files.json"

# ----------------------------------------------------------------------------- synthetic hub rows

_FACTS = [  # (thing, property question, right, wrong x4)
    ("water", "What does water turn into when it is cooled below zero degrees Celsius?", "ice",
     ["steam", "sand", "oil", "smoke"]),
    ("a magnet", "Which metal is attracted by a magnet?", "iron", ["copper", "gold", "aluminium", "silver"]),
    ("plants", "What gas do plants take in to make food?", "carbon dioxide", ["helium", "neon", "argon", "radon"]),
    ("the Moon", "What causes the phases of the Moon?", "its position relative to the Sun and Earth",
     ["clouds on Earth", "volcanoes on the Moon", "the Moon's colour", "ocean tides"]),
    ("a thermometer", "Which tool measures temperature?", "a thermometer",
     ["a ruler", "a barometer", "a compass", "a scale"]),
    ("bees", "Which animal helps flowers by carrying pollen?", "a bee", ["a rock", "a fish", "a worm", "a snail"]),
    ("sound", "Through which of these can sound not travel?", "a vacuum", ["water", "air", "steel", "wood"]),
    ("the heart", "Which organ pumps blood through the body?", "the heart",
     ["the lungs", "the stomach", "the liver", "the skin"]),
    ("a seed", "What does a seed need to sprout?", "water and warmth",
     ["darkness and salt", "ice and wind", "oil and sand", "smoke and noise"]),
    ("the Sun", "What is the Sun?", "a star", ["a planet", "a moon", "a comet", "an asteroid"]),
    ("rain", "Where does rain come from?", "clouds", ["rocks", "trees", "soil", "rivers bed"]),
    ("a circuit", "What does a closed electric circuit let flow?", "current",
     ["sand", "light only", "heat only", "air"]),
    ("fossils", "Where are fossils most often found?", "sedimentary rock",
     ["lava", "glaciers", "the air", "sea water"]),
    ("friction", "What does friction do to a sliding box?", "slows it down",
     ["speeds it up", "makes it lighter", "melts it", "makes it float"]),
    ("the lungs", "What do the lungs take from the air?", "oxygen", ["nitrogen only", "dust", "salt", "sugar"]),
    ("ice", "What happens to ice in a warm room?", "it melts", ["it grows", "it burns", "it freezes", "it sings"]),
    ("a lever", "A lever is an example of what?", "a simple machine",
     ["a living thing", "a gas", "a planet", "a mineral"]),
    ("a caterpillar", "What does a caterpillar become?", "a butterfly",
     ["a spider", "a beetle", "a frog", "a bird"]),
    ("salt water", "Which boils at a higher temperature than pure water?", "salt water",
     ["ice", "steam", "air", "oil vapour"]),
    ("iron", "What forms when iron is left in wet air?", "rust", ["glass", "plastic", "paper", "wax"]),
    ("wind", "What is wind?", "moving air", ["falling water", "light", "sound", "heat only"]),
    ("mirrors", "What does a mirror do to light?", "reflects it", ["eats it", "freezes it", "weighs it", "grows it"]),
    ("roots", "What do a plant's roots take up?", "water", ["light", "sound", "wind", "smoke"]),
    ("the Earth", "How long does the Earth take to turn once?", "one day",
     ["one year", "one hour", "one week", "one month"]),
    ("volcanoes", "What comes out of an erupting volcano?", "lava", ["snow", "rain", "leaves", "milk"]),
    ("a compass", "Which way does a compass needle point?", "north", ["down", "up", "east only", "at the Sun"]),
]

_GOALS = [  # (goal, right solution, wrong solution)
    ("To keep bread fresh longer,", "store it in a sealed bag.", "leave it open on a sunny window."),
    ("To cool a hot drink quickly,", "pour it into a wide cup.", "wrap it in a wool blanket."),
    ("To open a stuck jar lid,", "run the lid under hot water.", "put the jar in the freezer overnight."),
    ("To dry wet shoes,", "stuff them with newspaper.", "fill them with water."),
    ("To see in a dark room,", "switch on a lamp.", "close your eyes tightly."),
    ("To make rice not stick,", "rinse it before cooking.", "add glue to the pot."),
    ("To stop a door from squeaking,", "oil its hinges.", "paint the handle red."),
    ("To keep ice cream frozen,", "put it in the freezer.", "leave it in the oven."),
    ("To clean a dirty window,", "wipe it with soapy water.", "rub it with mud."),
    ("To carry soup to work,", "use a sealed flask.", "use a paper envelope."),
    ("To sharpen a pencil,", "use a sharpener.", "use a spoon."),
    ("To water a plant,", "pour water on the soil.", "pour water on the ceiling."),
    ("To hang a picture,", "use a nail and a hammer.", "use butter and toast."),
    ("To warm cold hands,", "rub them together.", "hold an ice cube."),
    ("To remember a phone number,", "write it down.", "forget it at once."),
    ("To keep a candle from dripping,", "chill it before lighting.", "shake it while it burns."),
    ("To cut paper neatly,", "use sharp scissors.", "tear it with wet hands."),
    ("To fix a flat bicycle tyre,", "patch the inner tube.", "paint the frame."),
    ("To boil an egg,", "put it in boiling water.", "put it in cold milk for a minute."),
    ("To find a lost key,", "retrace your steps.", "buy a new house."),
    ("To save a document,", "press the save button.", "turn off the screen."),
    ("To clean a paintbrush,", "rinse it in water.", "leave it in the sun with paint."),
    ("To keep milk from spoiling,", "keep it in the fridge.", "keep it on the heater."),
    ("To tie a shoe,", "loop and pull the laces.", "cut the laces off."),
    ("To make toast,", "put bread in a toaster.", "put bread in the sink."),
    ("To brighten a photo,", "raise its exposure.", "delete it."),
]

_WINO = [  # (sentence with _, option1, option2, answer)
    ("The trophy did not fit in the suitcase because the _ was too big.", "trophy", "suitcase", "1"),
    ("The trophy did not fit in the suitcase because the _ was too small.", "trophy", "suitcase", "2"),
    ("Anna helped Maria with homework because _ was good at math.", "Anna", "Maria", "1"),
    ("Anna asked Maria for help with homework because _ was good at math.", "Anna", "Maria", "2"),
    ("The cup broke when it hit the floor because the _ was fragile.", "cup", "floor", "1"),
    ("The cup did not break when it hit the carpet because the _ was soft.", "cup", "carpet", "2"),
    ("John gave his coat to Tom because _ was cold.", "John", "Tom", "2"),
    ("John took off his coat and gave it away because _ was warm.", "John", "Tom", "1"),
    ("The ice melted faster on the plate than in the cup because the _ was hotter.", "plate", "cup", "1"),
    ("The ice melted faster in the cup than on the plate because the _ was hotter.", "plate", "cup", "2"),
    ("The dog chased the cat up the tree because the _ was scared.", "dog", "cat", "2"),
    ("The dog barked at the cat because the _ was angry.", "dog", "cat", "1"),
    ("Sara paid Lena back because _ had borrowed money.", "Sara", "Lena", "1"),
    ("Sara thanked Lena because _ had lent her money.", "Sara", "Lena", "2"),
    ("The bag was heavier than the box because the _ held books.", "bag", "box", "1"),
    ("The box was heavier than the bag because the _ held books.", "bag", "box", "2"),
    ("Mark could not lift the table but Paul could because _ was weak.", "Mark", "Paul", "1"),
    ("Mark could not lift the table but Paul could because _ was strong.", "Mark", "Paul", "2"),
    ("The river flooded the town because the _ rose quickly.", "river", "town", "1"),
    ("The town was flooded by the river because the _ was low.", "river", "town", "2"),
    ("Emma read the book faster than Kate because _ reads slowly.", "Emma", "Kate", "2"),
    ("Emma read the book faster than Kate because _ reads quickly.", "Emma", "Kate", "1"),
    ("The shirt shrank in the dryer because the _ was too hot.", "shirt", "dryer", "2"),
    ("The phone died before the laptop because the _ had a small battery.", "phone", "laptop", "1"),
    ("The plant grew taller than the weed because the _ got more sun.", "plant", "weed", "1"),
    ("The weed grew taller than the plant because the _ got more sun.", "plant", "weed", "2"),
]


def synthetic_rows(task: str, rng: random.Random) -> list[dict]:
    """Deterministic rows in the hub schema of ``task`` (26 rows each)."""
    rows = []
    for i, (thing, q, right, wrong) in enumerate(_FACTS):
        if task == "openbookqa":
            labels = list("ABCD")
            opts = [right, *wrong[:3]]
            rng.shuffle(opts)
            rows.append({"id": f"syn-{i}", "question_stem": q.rstrip("?").replace("What", "Something that")
                         if i % 5 == 0 else q, "choices": {"text": opts, "label": labels},
                         "answerKey": labels[opts.index(right)]})
        elif task == "sciq":
            rows.append({"question": q, "distractor1": wrong[0], "distractor2": wrong[1], "distractor3": wrong[2],
                         "correct_answer": right,
                         "support": "" if i % 3 == 0 else f"Scientists study {thing} to learn how nature works. "})
        elif task == "commonsense_qa":
            labels = list("ABCDE")
            opts = [right, *wrong[:4]]
            rng.shuffle(opts)
            rows.append({"id": f"syn-{i}", "question": f" {q} " if i % 4 == 0 else q, "question_concept": thing,
                         "choices": {"label": labels, "text": opts}, "answerKey": labels[opts.index(right)]})
    if task == "piqa":
        for goal, good, bad in _GOALS:
            flip = rng.random() < 0.5
            rows.append({"goal": goal, "sol1": bad if flip else good, "sol2": good if flip else bad,
                         "label": int(flip)})
    if task == "winogrande":
        rows = [{"sentence": s, "option1": a, "option2": b, "answer": ans} for s, a, b, ans in _WINO]
    return rows


# eval split per task (where lm-eval evaluates), training split = first 10 rows
TASK_SPLITS = {"openbookqa": "test", "sciq": "test", "piqa": "validation", "commonsense_qa": "validation",
               "winogrande": "validation"}
N_TRAIN = 10


def write_task_data(out: Path) -> dict[str, dict[str, str]]:
    files = {}
    for task, split in TASK_SPLITS.items():
        rows = synthetic_rows(task, random.Random(f"whitebox-eval/{task}"))
        files[task] = {"train": write_jsonl(out / task / "train.jsonl", rows[:N_TRAIN]),
                       split: write_jsonl(out / task / f"{split}.jsonl", rows[N_TRAIN:])}
    return files


# ----------------------------------------------------------------------------- lm-eval runs

def evaluate(tm, tasks: list, model_args: dict, num_fewshot: int | None, batch_size: int, limit: int | None = None):
    """``lm_eval.simple_evaluate`` (``limit``: lm-eval's ``--limit``, the first N documents of each
    task, whose contexts are the first N of the full run: the sampler draws in document order)."""
    import lm_eval

    return lm_eval.simple_evaluate(model="hf", model_args=dict(model_args), tasks=tasks, num_fewshot=num_fewshot,
                                   batch_size=batch_size, device="cpu", log_samples=True, task_manager=tm,
                                   limit=limit)


def splits_of(task_cfg_files: dict[str, str]) -> dict:
    """lm-eval split keys for local files: every split the files lack is null."""
    have = set(task_cfg_files)
    out = {}
    for key, name in (("training_split", "train"), ("validation_split", "validation"), ("test_split", "test")):
        if name not in have:
            out[key] = None
    return out


def items_of(samples: list[dict], metrics: list[str], hashed: bool) -> list[dict]:
    items = []
    for s in sorted(samples, key=lambda s: s["doc_id"]):
        args = [list(a) for a in s["arguments"]]
        it = {"doc_id": s["doc_id"], "target": s["target"],
              "loglik": [float(r[0]) for r in s["filtered_resps"]],
              "is_greedy": [bool(r[1]) for r in s["filtered_resps"]],
              **{m: float(s[m]) for m in metrics}, "prompt_hash": s["prompt_hash"]}
        if hashed:
            it["continuations"] = [a[1] for a in args]
            it["n_contexts"] = len({a[0] for a in args})
        else:
            it["requests"] = args
        items.append(it)
    return items


def request_prompts(task, shots: int) -> list[dict]:
    """Per document (doc_id order) the sha256 of each request's context and the
    continuations, from lm-eval's own ``build_all_requests`` with the seed and shot count
    ``simple_evaluate`` sets (no model is run)."""
    from lm_eval.utils import hash_string

    if task.get_config("num_fewshot") != 0:
        task.set_config(key="num_fewshot", value=shots)
    task.set_fewshot_seed(seed=1234)
    task.build_all_requests(limit=None, rank=0, world_size=1, cache_requests=False)
    by_doc: dict[int, list] = {}
    for inst in task.instances:
        by_doc.setdefault(inst.doc_id, []).append(inst)
    out = []
    for doc_id in sorted(by_doc):
        insts = sorted(by_doc[doc_id], key=lambda i: i.idx)
        out.append({"doc_id": doc_id, "prompt_hash": hash_string(insts[0].arguments[0]),
                    "continuations": [i.arguments[1] for i in insts]})
    return out


def write(path: Path, out: dict, replacements: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sanitize(out, replacements), indent=0, ensure_ascii=False) + "\n", encoding="utf-8")


def metrics_of(results: dict, name: str) -> list[str]:
    return [k.split(",")[0] for k in results["results"][name] if k.endswith(",none") and "stderr" not in k]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("tasks", "whole"), required=True)
    ap.add_argument("--datasets", type=Path, default=REPO.parent / "shared" / "datasets")
    ap.add_argument("--model-dir")
    ap.add_argument("--project-python", default=os.environ.get("WHITEBOX_PYTHON", str(REPO / ".venv" / "bin" / "python")))
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--tmp", type=Path, default=Path("/tmp/lm_eval_fixtures"))
    ap.add_argument("--out", type=Path, default=None,
                    help=f"--part tasks: the folder (default {TASKS_DIR.relative_to(REPO)}); --part whole: the file "
                         f"(default {WHOLE_FILE.relative_to(REPO)})")
    args = ap.parse_args()
    tasks_dir = args.out or TASKS_DIR
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import lm_eval
    from lm_eval.tasks import TaskManager

    model_dir = args.model_dir or find_model_dir(args.project_python)
    model_args = {"pretrained": model_dir, "dtype": "float32"}
    tm = TaskManager(metadata=dict(model_args))
    header = {"lm_eval_version": lm_eval.__version__ if hasattr(lm_eval, "__version__") else "0.4.13",
              "model": "smollm2-135m (dequantized GGUF, float32, cpu)", "batch_size": args.batch_size,
              "fewshot_random_seed": 1234, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "command": "python benchmarks/lm_eval_fixtures.py --part " + args.part}
    replacements = {model_dir: MODEL_PLACEHOLDER, str(args.tmp): DATA_PLACEHOLDER, str(tasks_dir): "<fixture data>"}

    if args.part == "tasks":
        files = write_task_data(tasks_dir / "data")
        out = {"header": {**header, "data": "tests/fixtures/lm_eval_tasks/data/<task>/<split>.jsonl (synthetic, "
                          "each task's hub schema; train = the first 10 rows)", "splits": TASK_SPLITS}, "runs": {}}
        for shots in (0, TASK_SHOTS):
            tasks = [build_task(tm, t, local_source(files[t], **splits_of(files[t]))) for t in TASK_SPLITS]
            res = evaluate(tm, tasks, model_args, shots, args.batch_size)
            for t in TASK_SPLITS:
                ms = metrics_of(res, t)
                out["runs"][f"{t}/{shots}"] = {"task": t, "num_fewshot": shots, "metrics": ms,
                                               "aggregate": {m: res["results"][t][f"{m},none"] for m in ms},
                                               "n": len(res["samples"][t]),
                                               "items": items_of(res["samples"][t], ms, hashed=False)}
                print(t, shots, out["runs"][f"{t}/{shots}"]["aggregate"], flush=True)
        path = tasks_dir / "lm_eval_tasks.json"
    else:
        ds = args.datasets
        arc_file = sorted((ds / "arc").glob("*.jsonl"))[0]
        hs_file = sorted((ds / "hellaswag").glob("*.jsonl"))[0]
        data = args.tmp / "data"
        arc, hs = arc_rows(arc_file, None), hellaswag_rows(hs_file, None)
        mmlu_test = {s: mmlu_rows(ds / "mmlu" / "test" / f"{s}_test.csv", s, None) for s in MMLU_SUBJECTS}
        mmlu_dev = {s: mmlu_rows(ds / "mmlu" / "dev" / f"{s}_dev.csv", s, None) for s in MMLU_SUBJECTS}
        na, nh = TRAIN_ROWS["arc_challenge"], TRAIN_ROWS["hellaswag"]
        runs = {
            "arc_challenge/0": ([("arc_challenge", local_source({"test": write_jsonl(data / "arc0/test.jsonl", arc)},
                                                               training_split=None, validation_split=None))], 0),
            "hellaswag/0": ([("hellaswag", local_source({"validation": write_jsonl(data / "hs0/val.jsonl", hs)},
                                                        training_split=None))], 0),
            "arc_challenge/25": ([("arc_challenge", local_source(
                {"train": write_jsonl(data / "arc25/train.jsonl", arc[:na]),
                 "test": write_jsonl(data / "arc25/test.jsonl", arc[na:])}, validation_split=None))], 25),
            "hellaswag/10": ([("hellaswag", local_source(
                {"train": write_jsonl(data / "hs10/train.jsonl", hs[:nh]),
                 "validation": write_jsonl(data / "hs10/val.jsonl", hs[nh:])}))], 10),
        }
        for k in (0, 5):
            runs[f"mmlu/{k}"] = ([(f"mmlu_{s}", local_source(
                {"test": write_jsonl(data / f"mmlu/{s}/test.jsonl", mmlu_test[s]),
                 "dev": write_jsonl(data / f"mmlu/{s}/dev.jsonl", mmlu_dev[s])})) for s in MMLU_SUBJECTS], k)
        order = ("arc_challenge/0", "hellaswag/0", "mmlu/0", "mmlu/5", "hellaswag/10", "arc_challenge/25")
        runs = {k: runs[k] for k in order}  # cheapest model runs first
        out = {"header": {**header, "train_rows": TRAIN_ROWS, "sources": {
            "arc_challenge": f"arc/{arc_file.name}", "hellaswag": f"hellaswag/{hs_file.name}",
            "mmlu": "mmlu/test/<subject>_test.csv, demos mmlu/dev/<subject>_dev.csv"},
            "source_files_sha256": {str(p.relative_to(ds)): sha256(p) for p in [arc_file, hs_file]}}, "runs": {}}
        path = args.out or WHOLE_FILE
        if path.exists():  # scored runs already frozen are kept (the model runs take long on 2 cores)
            out["runs"] = json.loads(path.read_text(encoding="utf-8")).get("runs", {})
        for key, (spec, shots) in runs.items():  # 1. every prompt, from lm-eval's request building alone
            block = {}
            for n, ov in spec:
                task = build_task(tm, n, ov)
                block[n] = {"prompts": request_prompts(task, shots)}
            prev = out["runs"].get(key, {})
            out["runs"][key] = {"num_fewshot": shots, "tasks": {
                n: {**prev.get("tasks", {}).get(n, {}), **b} for n, b in block.items()}}
            print(key, "prompts:", sum(len(b["prompts"]) for b in block.values()), flush=True)
        write(path, out, replacements)
        only = os.environ.get("ONLY")
        for key, (spec, shots) in runs.items():  # 2. lm-eval's own scored run
            if (only and key not in only.split(",")) or all(
                    "items" in out["runs"][key]["tasks"][n] for n, _ in spec):
                continue
            tasks = [build_task(tm, n, ov) for n, ov in spec]
            limit = int(os.environ["LIMIT"]) if os.environ.get("LIMIT") else None
            res = evaluate(tm, tasks, model_args, shots, args.batch_size, limit=limit)
            for n, _ in spec:
                ms = metrics_of(res, n)
                out["runs"][key]["tasks"][n].update(
                    metrics=ms, aggregate={m: res["results"][n][f"{m},none"] for m in ms}, scored_limit=limit,
                    items=items_of(res["samples"][n], ms, hashed=True))
            print(key, {n: out["runs"][key]["tasks"][n]["aggregate"] for n, _ in spec}, flush=True)
            write(path, out, replacements)
        print(f"wrote {path}")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sanitize(out, replacements), indent=0 if args.part == "whole" else 1,
                               ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
