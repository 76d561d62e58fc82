"""GAR across models (002 fig. 2 and the accuracy table), from finished run folders.

Each folder is a ``whitebox-eval gar --mode evaluate`` run (the full benchmark:
``--tasks all``). Draws one four-panel figure with a bar per model and prints the
accuracy table by difficulty and syntactic variation as Markdown.

    whitebox-eval gar --model smollm2-135m --tasks all --run-id gar-smollm2
    whitebox-eval gar --model gemma3-270m --tasks all --run-id gar-gemma
    python examples/gar_models.py runs/gar-smollm2 runs/gar-gemma --plot gar_models.png
"""

from __future__ import annotations

import argparse

from whitebox_eval.gar import evaluation as ev
from whitebox_eval.gar.selection import example_id, select_tasks, task_examples
from whitebox_eval.runs import RunFolder


def _pct(v) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="GAR evaluation run folders")
    ap.add_argument("--plot", default="gar_models.png", help="where the figure goes")
    args = ap.parse_args()
    runs, results = {}, {}
    for path in args.runs:
        folder = RunFolder.open(path)
        cfg = folder.config
        examples = task_examples(select_tasks(cfg["tasks"], include_kr=cfg["include_kr"]), cfg["limit"], cfg["seed"])
        samples = {s["id"]: s for s in folder.read_samples()}
        runs[cfg["model"]] = (examples, [bool(samples[example_id(e)]["correct"]) for e in examples])
        results[cfg["model"]] = folder.load_results()
    print(f"figure: {ev.plot_gar_summary(runs, args.plot)}\n")
    for rule in ("appc", "argmax"):
        print(f"accuracy (%), {rule} rule")
        rows = [("generation", "overall generation"), ("classification", "overall classification")]
        header = "| | " + " | ".join(results) + " |"
        print(header + "\n|" + " --- |" * (len(results) + 1))
        for form, label in rows:
            print(f"| {label} | " + " | ".join(_pct(r[rule]["by_form"].get(form)) for r in results.values()) + " |")
        print("| KR sub-problems | " + " | ".join(_pct(r[rule]["kr"]) for r in results.values()) + " |")
        for form in ("generation", "classification"):
            keys = next(iter(results.values()))[rule]["by_difficulty"][form]
            for k in keys:
                print(f"| {form} {k} | " + " | ".join(_pct(r[rule]["by_difficulty"][form].get(k)) for r in results.values()) + " |")
        for k in next(iter(results.values()))[rule]["by_syntactic_variation"]:
            print(f"| syntactic {k} | " + " | ".join(_pct(r[rule]["by_syntactic_variation"].get(k)) for r in results.values()) + " |")
        gaps = [r[rule]["compositionality_gap"] for r in results.values()]
        print("| compositionality gap | " + " | ".join("n/a" if g is None else f"{g:.2f}" for g in gaps) + " |\n")


if __name__ == "__main__":
    main()
