"""Data-contamination simulation (paper 001 sec. 3.4, App. A.6): fine-tune on a task's test items, then
compare (accuracy, MUI) before and after on that task and on another one.

Following the paper ("test samples are concatenated with answers"), every test item of
the contaminated task is rendered exactly as the MUI study prompts it (for SmolLM2-Instruct:
zero-shot through the chat template) and followed by its gold answer and the end-of-turn
token; the loss is on the answer tokens only. Full-parameter AdamW, a few epochs (the
paper's ranges: lr 7e-5 .. 2e-9, 2-4 epochs, batch 4-128). The checkpoint is saved as a
local Hugging Face folder (safetensors + tokenizer), then ``compare_checkpoints`` runs the
MUI study for both checkpoints on both tasks and prints each task's direction (sec. 3.3).
Expected from the paper: the contaminated task moves up in accuracy with higher MUI
(accumulating; coarsening early in training), the other task tends to collapse.

    nice .venv/bin/python examples/mui_contamination.py --limit 48 --epochs 3 \\
        --checkpoint /tmp/mui_ckpt/smollm2-arith --output /tmp/mui_runs/contamination
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch

from whitebox_eval.models import load_model
from whitebox_eval.mui.compare import compare_checkpoints, comparison_table, save_comparison
from whitebox_eval.mui.study import MUIConfig, prepare_task


def contaminate(model_name: str, task: str, checkpoint: Path, *, limit: int, epochs: int, lr: float, batch_size: int,
                seed: int) -> dict:
    """Fine-tune ``model_name`` on ``task``'s evaluated items + gold answers; save to ``checkpoint``."""
    torch.manual_seed(seed)
    lm = load_model(model_name)
    tok, model = lm.tokenizer, lm.model
    prepared = prepare_task(MUIConfig(model=model_name, task=task, limit=limit, seed=seed), tok)
    eos = tok.eos_token_id
    examples = []
    for it in prepared.items:
        prompt = prepared.prompt(it, tok)  # exactly as the MUI study prompts it
        answer = tok(it.gold_response.strip() if prepared.fmt.chat else it.gold_response, add_special_tokens=False)["input_ids"]
        examples.append((prompt, [*answer, eos]))
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    rng = random.Random(seed)
    losses = []
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    for epoch in range(epochs):
        order = list(range(len(examples)))
        rng.shuffle(order)
        for start in range(0, len(order), batch_size):
            chunk = [examples[i] for i in order[start:start + batch_size]]
            width = max(len(p) + len(a) for p, a in chunk)
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            labels = torch.full((len(chunk), width), -100, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, (p, a) in enumerate(chunk):  # right padding for training
                seq = p + a
                ids[row, :len(seq)] = torch.tensor(seq)
                labels[row, len(p):len(seq)] = torch.tensor(a)
                mask[row, :len(seq)] = 1
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        print(f"epoch {epoch + 1}: mean loss {sum(losses[-(len(order) // batch_size or 1):]) / (len(order) // batch_size or 1):.4f}",
              flush=True)
    model.eval()
    checkpoint.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(checkpoint, safe_serialization=True)
    tok.save_pretrained(checkpoint)
    return {"steps": len(losses), "first_loss": losses[0], "last_loss": losses[-1], "n_examples": len(examples)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--task", default="arithmetic-gen", help="the contaminated task (its test items are trained on)")
    ap.add_argument("--other-task", default="ssd", help="the out-of-domain task")
    ap.add_argument("--limit", type=int, default=48)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--train-batch-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoint", default="/tmp/mui_ckpt/smollm2-contaminated")
    ap.add_argument("--output", default="/tmp/mui_runs/contamination")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ckpt = Path(args.checkpoint)
    t0 = time.time()
    if not (ckpt / "config.json").is_file():
        info = contaminate(args.model, args.task, ckpt, limit=args.limit, epochs=args.epochs, lr=args.lr,
                           batch_size=args.train_batch_size, seed=args.seed)
        print("fine-tune:", json.dumps(info), f"({time.time() - t0:.0f}s)", flush=True)
    base = MUIConfig(model=args.model, task=args.task, limit=args.limit, batch_size=12, seed=args.seed,
                     max_new_tokens=args.max_new_tokens)
    rows = compare_checkpoints(args.model, str(ckpt), [args.task, args.other_task], base, args.output)
    print(comparison_table(rows))
    folder = save_comparison(rows, args.output, before=args.model, after=str(ckpt))
    print(f"results and plot: {folder.path}  (total {time.time() - t0:.0f}s)")


if __name__ == "__main__":
    main()
