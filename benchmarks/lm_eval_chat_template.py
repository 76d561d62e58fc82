"""Freeze lm-eval's own requests and log-likelihoods under ``--apply_chat_template``.

Runs lm-evaluation-harness itself (an optional dependency, never needed at runtime) on the
first N items of an ARC file in llm-foundry's layout with the bundled SmolLM2-135M-Instruct,
through its chat template, in two multiple-choice styles:

- ``cloze``: ARC's lm-eval prompt ``Question: ...\\nAnswer:``, choices = the option texts;
- ``letters``: our paper-000 prompt (``tasks.prompts.render_prompt``, no uncertainty
  options) as the question, choices ``A``..``D`` (as lm-eval's MMLU scores letters).

For each item it records lm-eval's context string, its continuations (the target
delimiter dropped under the template), the tokens it scores (the generation prompt's
trailing ``\\n`` moved into the continuation) and the per-choice log-likelihoods.
``tests/integration/test_chat_template_smollm2.py`` checks ``mcqa --apply-chat-template``
against the frozen file. Run with the lm-eval venv, this checkout's ``src`` on the path:

    MODEL=$(python -c "from whitebox_eval.models.loading import resolve_source as r; print(r('smollm2-135m')[0])")
    PYTHONPATH=src /work/lmeval-venv/bin/python benchmarks/lm_eval_chat_template.py \\
        ../shared/datasets/arc/arc_challenge_sample.llmfoundry.jsonl --n 5 --model "$MODEL" \\
        --out tests/fixtures/lm_eval_chat_template_arc.json

(the first line with the project's venv: the bundled model's safetensors folder).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from importlib.metadata import version
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("arc_jsonl")
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--model", required=True, help="the bundled SmolLM2's safetensors folder (see above)")
    ap.add_argument("--out", default="tests/fixtures/lm_eval_chat_template_arc.json")
    args = ap.parse_args()

    from lm_eval.api.task import ConfigurableTask
    from lm_eval.models.huggingface import HFLM

    from whitebox_eval.tasks import load_mcq_dataset
    from whitebox_eval.tasks.prompts import render_prompt

    rows = [json.loads(line) for line in Path(args.arc_jsonl).read_text().splitlines()[: args.n]]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "arc.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in rows))
        items = list(load_mcq_dataset("arc", src))
        for r, it in zip(rows, items):
            r["prompt"] = render_prompt(it, uncertainty=False).text
        src.write_text("".join(json.dumps(r) + "\n" for r in rows))
        lm = HFLM(pretrained=args.model, batch_size=1, dtype="float32", device="cpu")
        styles = {"cloze": dict(doc_to_text="{{query}}\nAnswer:", doc_to_choice="{{choices}}", doc_to_target="{{gold}}"),
                  "letters": dict(doc_to_text="{{prompt}}", doc_to_choice=["A", "B", "C", "D"], doc_to_target="{{gold}}")}
        out = {"lm_eval_version": version("lm_eval"), "transformers_version": version("transformers"),
               "model": "SmolLM2-135M-Instruct (bundled smollm2-135m), float32, CPU",
               "source": f"first {args.n} rows of {Path(args.arc_jsonl).name}",
               "rows": [{k: v for k, v in r.items() if k != "prompt"} for r in rows], "styles": {}}
        for style, conf in styles.items():
            task = ConfigurableTask(config=dict(task=f"wbe_chat_{style}", dataset_path="json",
                                                dataset_kwargs={"data_files": {"test": str(src)}}, test_split="test",
                                                output_type="multiple_choice", metric_list=[{"metric": "acc"}], **conf))
            docs = []
            for doc in task.test_docs():
                ctx = task.fewshot_context(doc, 0, apply_chat_template=True, chat_template=lm.apply_chat_template)
                reqs = task.construct_requests(doc, ctx, apply_chat_template=True, metadata=(task.config.task, 0, 1))
                pairs = [r.args for r in reqs]
                docs.append({"context": ctx, "continuations": [c for _, c in pairs],
                             "scored_tokens": [lm.tokenizer.convert_ids_to_tokens(lm._encode_pair(a, c)[1]) for a, c in pairs],
                             "loglik": [x[0] for x in lm.loglikelihood(reqs, disable_tqdm=True)]})
            out["styles"][style] = docs
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
