"""Bad-input and fault cases, shared by ``tests/faults`` and ``benchmarks/fault_table.py``
(which runs them against two versions and prints the table).

:func:`build_fixtures` writes everything the cases need under one folder: a tiny random
llama with a real (trained) tokenizer saved as a model folder, damaged copies of it, bad
probe files and run folders. :data:`CASES` lists the command lines; ``{d}`` stands for
the fixture folder.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

MCQA = ["mcqa", "--model", "{d}/tiny", "--limit", "8", "--min-val-items", "2", "--batch-size", "4",
        "--methods", "baseline,qk", "--output", "{d}/runs"]


REPRODUCE = ["reproduce", "004", "--scale", "micro", "--model", "{d}/tiny", "--data", "triviaqa={d}/trivia.jsonl"]


@dataclass(frozen=True)
class Case:
    """One command line; after the fix it exits ``code`` with one ``error:`` line holding ``expect``."""

    id: str
    argv: list[str]
    expect: str
    code: int = 2
    patch: str | None = None  # "enospc" / "erofs": the 3rd fsync of the run fails like that
    env: dict[str, str] = field(default_factory=dict)
    issue: int = 13  # the issue that found it

    def args(self, d: Path) -> list[str]:
        return [a.replace("{d}", str(d)) for a in self.argv]


def _with(base: list[str], **options: str) -> list[str]:
    out = list(base)
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if flag in out:
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
    return out


CASES: list[Case] = [
    Case("mcqa --output FILE", _with(MCQA, output="{d}/a_file.txt"), "is a file, not a folder"),
    Case("mcqa --batch-size 0", _with(MCQA, batch_size="0"), "'--batch-size' / '--batch_size': 0 is not in the range x>=1"),
    Case("mcqa --batch-size -3", _with(MCQA, batch_size="-3"), "'--batch-size' / '--batch_size': -3 is not in the range x>=1"),
    Case("formats --batch-size 0", ["formats", "--model", "{d}/tiny", "--limit", "2", "--batch-size", "0",
                                    "--output", "{d}/runs"], "'--batch-size' / '--batch_size': 0 is not in the range"),
    Case("mui --batch-size 0", ["mui", "--model", "{d}/tiny", "--task", "arithmetic-gen", "--limit", "2",
                                "--batch-size", "0", "--output", "{d}/runs"], "'--batch-size' / '--batch_size': 0 is not in the range"),
    Case("mui masking --batch-size 0", ["mui", "masking", "--model", "{d}/tiny", "--limit", "2", "--batch-size", "0",
                                        "--output", "{d}/runs"], "'--batch-size' / '--batch_size': 0 is not in the range"),
    Case("gar --batch-size 0", ["gar", "--model", "{d}/tiny", "--limit", "2", "--batch-size", "0",
                                "--output", "{d}/runs"], "'--batch-size' / '--batch_size': 0 is not in the range"),
    Case("span --batch-size 0", ["span", "--model", "{d}/tiny", "--limit", "2", "--batch-size", "0",
                                 "--output", "{d}/runs"], "'--batch-size' / '--batch_size': 0 is not in the range"),
    Case("mcqa --ablation-k 0", _with(MCQA, methods="baseline,qk,ablation", ablation_k="0"),
         "'--ablation-k': 0 is not in the range x>=1"),
    Case("formats --max-new-tokens 0", ["formats", "--model", "{d}/tiny", "--limit", "2", "--max-new-tokens", "0",
                                        "--output", "{d}/runs"], "'--max-new-tokens': 0 is not in the range"),
    Case("mui --dtype bogus", ["mui", "--model", "{d}/tiny", "--task", "arithmetic-gen", "--limit", "2",
                               "--dtype", "bogus", "--output", "{d}/runs"], "'--dtype': 'bogus' is not one of"),
    Case("gar probe: SNLI null sentence", ["gar", "--mode", "probe", "--model", "{d}/tiny", "--heads", "0.0",
                                           "--probe-data", "{d}/snli_null.jsonl", "--on-bad-row", "error",
                                           "--output", "{d}/runs"], "snli_null.jsonl:3: sentence2 is None"),
    Case("gar probe: GoT latin-1", ["gar", "--mode", "probe", "--model", "{d}/tiny", "--heads", "0.0",
                                    "--probe-data", "{d}/got_latin1.csv", "--on-bad-row", "error",
                                    "--output", "{d}/runs"], "got_latin1.csv:3: not UTF-8 text (byte 0xFC)"),
    Case("gar probe: SNLI null sentence (default --on-bad-row skip)",
         ["gar", "--mode", "probe", "--model", "{d}/tiny", "--heads", "0.0,1.1", "--folds", "2",
          "--probe-data", "{d}/snli_null.jsonl", "--output", "{d}/runs", "--run-id", "snli-skip"],
         "skipped 1 malformed row(s)", code=0),
    Case("gar probe: GoT latin-1 (default --on-bad-row skip)",
         ["gar", "--mode", "probe", "--model", "{d}/tiny", "--heads", "0.0,1.1", "--folds", "2",
          "--probe-data", "{d}/got_latin1.csv", "--output", "{d}/runs", "--run-id", "got-skip"],
         "skipped 1 malformed row(s)", code=0),
    Case("gar probe: GoT binary", ["gar", "--mode", "probe", "--model", "{d}/tiny", "--heads", "0.0",
                                   "--probe-data", "{d}/got_binary.csv", "--output", "{d}/runs"],
         "got_binary.csv:1:"),
    Case("zero-byte .safetensors", ["inspect", "--model", "{d}/st_zero"], "st_zero/model.safetensors is not a readable "
         "safetensors file (the file is empty)"),
    Case("truncated .safetensors", ["inspect", "--model", "{d}/st_truncated"], "st_truncated/model.safetensors is not a "
         "readable safetensors file (truncated"),
    Case("corrupted .safetensors header", ["inspect", "--model", "{d}/st_corrupt"], "st_corrupt/model.safetensors is "
         "not a readable safetensors file (corrupted header)"),
    Case("--allow-pickle, objects in checkpoint", ["inspect", "--model", "{d}/pickle_objects", "--allow-pickle"],
         "holds Python objects beyond tensors (argparse.Namespace), which torch's weights-only loader refuses even "
         "with --allow-pickle"),
    Case("report, corrupted results.json", ["report", "{d}/runs/corrupt"], "warning: {d}/runs/corrupt/results.json is "
         "corrupted", code=0),
    Case("compare, corrupted results.json", ["compare", "{d}/runs/good", "{d}/runs/corrupt"],
         "{d}/runs/corrupt/results.json is corrupted"),
    Case("mcqa, disk full mid-run", _with(MCQA, run_id="full"), "cannot write to {d}/runs/full: the disk is full",
         patch="enospc"),
    Case("mcqa, read-only output mid-run", _with(MCQA, run_id="ro"), "cannot write to {d}/runs/ro: the file system "
         "is read-only", patch="erofs"),
    Case("mcqa --model missing", _with(MCQA, model="{d}/no_such_model", run_id="nomodel"), "model path not found"),
    # a read that fails (a real EIO: the file is a link to /proc/self/mem, whose first page is not mapped)
    Case("mcqa hellaswag=FILE, EIO while reading", _with(MCQA, task="hellaswag={d}/eio.jsonl"),
         "cannot read {d}/eio.jsonl: Input/output error", issue=38),
    Case("mcqa mmlu=FILE.csv, EIO while reading", _with(MCQA, task="mmlu={d}/eio.csv"),
         "cannot read {d}/eio.csv: Input/output error", issue=38),
    Case("mui gsm8k=FILE, EIO while reading", ["mui", "--model", "{d}/tiny", "--task", "gsm8k={d}/eio.jsonl", "--limit",
                                               "2", "--output", "{d}/runs"], "cannot read {d}/eio.jsonl: Input/output error",
         issue=38),
    Case("mcqa mcq=x.parquet, not Parquet", _with(MCQA, task="mcq={d}/not_parquet.parquet"),
         "cannot read {d}/not_parquet.parquet: it is damaged or not in the format its name says (", issue=38),
    Case("mui gen=x.parquet, not Parquet", ["mui", "--model", "{d}/tiny", "--task", "gen={d}/not_parquet.parquet",
                                            "--limit", "2", "--output", "{d}/runs"],
         "cannot read {d}/not_parquet.parquet: it is damaged or not in the format its name says (", issue=38),
    Case("mcqa mcq=x.tsv, not UTF-8", _with(MCQA, task="mcq={d}/latin1.tsv"),
         "{d}/latin1.tsv:3: not UTF-8 text (byte 0xFC); re-save the file as UTF-8", issue=38),
    Case("reproduce --output FILE", [*REPRODUCE, "--output", "{d}/a_file.txt"], "is a file, not a folder", issue=38),
    Case("reproduce, its only --model missing",
         _with([*REPRODUCE, "--output", "{d}/runs"], model="{d}/no_such_model", run_id="r-missing"),
         "none of the plan's 4 runs can start: model {d}/no_such_model: model path not found", issue=38),
    Case("reproduce, its only --model with a broken config.json",
         _with([*REPRODUCE, "--output", "{d}/runs"], model="{d}/bad_config", run_id="r-config"),
         "model {d}/bad_config: could not load model from {d}/bad_config", issue=38),
    Case("reproduce, --data not UTF-8",
         _with([*REPRODUCE, "--output", "{d}/runs"], data="triviaqa={d}/trivia_latin1.jsonl", run_id="r-latin1"),
         "--data triviaqa: {d}/trivia_latin1.jsonl:2: not UTF-8 text (byte 0xE4)", issue=38),
    Case("reproduce --data FILE, EIO while reading",  # --data paths are resolved: the message names the link's target
         _with([*REPRODUCE, "--output", "{d}/runs"], data="triviaqa={d}/eio.jsonl", run_id="r-eio"),
         "Input/output error (the disk or file system failed while reading it)", issue=38),
    Case("mcqa --resume, config.yaml deleted", [*_with(MCQA, run_id="noconfig"), "--resume"],
         "cannot resume {d}/runs/noconfig: its config.yaml is missing", issue=38),
    Case("mui gen=FILE.jsonl without a prompt column", ["mui", "--model", "{d}/tiny", "--task", "gen={d}/gen_no_prompt.jsonl",
                                                         "--limit", "2", "--output", "{d}/runs"],
         "{d}/gen_no_prompt.jsonl:1: no prompt or question column", issue=38),
    Case("mui --on-bad-row error", ["mui", "--model", "{d}/tiny", "--task", "gen={d}/gen_one_bad.jsonl", "--limit", "2",
                                    "--on-bad-row", "error", "--output", "{d}/runs"], "{d}/gen_one_bad.jsonl:2: no answer",
         issue=38),
]


def failing_fsync(kind: str, after: int = 2):
    """An ``os.fsync`` whose ``after+1``-th and later calls fail with ENOSPC or EROFS."""
    number = {"enospc": errno.ENOSPC, "erofs": errno.EROFS}[kind]
    real, calls = os.fsync, [0]

    def fsync(fd):
        calls[0] += 1
        if calls[0] > after:
            raise OSError(number, os.strerror(number))
        return real(fd)

    return fsync


# ---------------------------------------------------------------------- fixtures


def tiny_tokenizer():
    """A byte-level BPE tokenizer trained on SSD prompts (deterministic)."""
    import transformers as tf
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from whitebox_eval.tasks.prompts import render_prompt
    from whitebox_eval.tasks.ssd import make_ssd

    texts = [render_prompt(it).text + " A B C D E F 0 1 2 3 4 5 6 7 8 9 + = ?" for it in make_ssd(300, 4, seed=1)]
    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=400, special_tokens=["<pad>", "<unk>", "<eos>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tf.PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>")


def build_model_dir(path: Path) -> Path:
    """Save a tiny random llama (3 layers, 4 heads) and its tokenizer as a model folder."""
    import torch
    import transformers as tf

    tok = tiny_tokenizer()
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=12, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id, bos_token_id=None)
    model = tf.LlamaForCausalLM(cfg).eval()
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def build_smollm2_vocab_model_dir(path: Path) -> Path:
    """A tiny random llama with SmolLM2-135M's real tokenizer (word-initial tokens, which
    GAR's first-token scoring needs) as a model folder; needs the bundled model."""
    import torch
    import transformers as tf

    from whitebox_eval.models import load_model

    tok = load_model("smollm2-135m").tokenizer
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, pad_token_id=0,
                         eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id)
    model = tf.LlamaForCausalLM(cfg).eval()
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def build_fixtures(d: Path) -> Path:
    """Write every fixture the cases use under ``d`` (returns ``d``)."""
    import torch

    d.mkdir(parents=True, exist_ok=True)
    model = build_model_dir(d / "tiny")
    (d / "a_file.txt").write_text("not a folder\n")
    lines = [{"sentence1": f"Person {i} plays a guitar.", "sentence2": f"Person {i} plays music." if i % 2 else
              f"Person {i} sleeps.", "gold_label": "entailment" if i % 2 else "contradiction"} for i in range(13)]
    lines[2]["sentence2"] = None  # line 3
    (d / "snli_null.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows = [f"The city of Town{i} is in Country{i if i % 2 else i + 1}.,{i % 2}" for i in range(12)]
    rows.insert(1, "The city of Z\u00fcrich is in Spain.,0")  # line 3
    (d / "got_latin1.csv").write_bytes(("statement,label\n" + "\n".join(rows) + "\n").encode("latin-1"))
    (d / "got_binary.csv").write_bytes(bytes(range(256)) * 8)
    weights = (model / "model.safetensors").read_bytes()
    for name, data in (("st_zero", b""), ("st_truncated", weights[: len(weights) // 2]),
                       ("st_corrupt", b"\x10\x00\x00\x00\x00\x00\x00\x00{not json!!!!!!!" + weights[24:])):
        shutil.copytree(model, d / name)
        (d / name / "model.safetensors").write_bytes(data)
    shutil.copytree(model, d / "pickle_objects")
    from safetensors.torch import load_file

    state = load_file(str(model / "model.safetensors"))
    state["extra"] = argparse.Namespace(note="not a tensor")
    (d / "pickle_objects" / "model.safetensors").unlink()
    torch.save(state, d / "pickle_objects" / "pytorch_model.bin")
    _bad_data(d)
    shutil.copytree(model, d / "bad_config")
    (d / "bad_config" / "config.json").write_text('{"model_type": "llama", ')
    _fake_runs(d / "runs")
    return d


def _bad_data(d: Path) -> None:
    """Bad data files: a link that fails with EIO when read, a .parquet that is not
    Parquet, text that is not UTF-8, generation files missing a column."""
    for name in ("eio.jsonl", "eio.csv"):
        (d / name).symlink_to("/proc/self/mem")  # reading its first page fails with EIO (Linux)
    (d / "not_parquet.parquet").write_text("question,answer\nnot parquet,at all\n")
    (d / "latin1.tsv").write_bytes("question\tA\tB\tanswer\nWhat is 1+1?\t2\t3\tA\nWho is Z\u00fcrich?\tx\ty\tA\n"
                                   .encode("latin-1"))
    trivia = [{"context": f"Question: What is {i} + {i}?\nAnswer:", "answer": str(2 * i), "aliases": [str(2 * i)]}
              for i in range(8)]
    (d / "trivia.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trivia))
    lines = [json.dumps(t) for t in trivia]
    lines[1] = lines[1].replace("What", "Wh\u00e4t")
    (d / "trivia_latin1.jsonl").write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    (d / "gen_no_prompt.jsonl").write_text('{"q": "2+2?", "answer": "4"}\n{"q": "3+3?", "answer": "6"}\n')
    (d / "gen_one_bad.jsonl").write_text('{"question": "2+2?", "answer": "4"}\n{"question": "3+3?"}\n'
                                         '{"question": "3+4?", "answer": "7"}\n')


def _fake_runs(root: Path) -> None:
    """Two finished-looking run folders; ``corrupt`` has a truncated results.json."""
    from whitebox_eval.runs import RunFolder

    for run_id in ("good", "corrupt"):
        folder = RunFolder.create(root, {"suite": "mcqa", "model": "tiny", "task": "ssd"}, run_id=run_id)
        folder.append_samples([{"id": "q1", "gold": 0, "pred_baseline": 0}])
        folder.save_results({"headline": {"acc,baseline": 0.5}, "n_items": 1})
        folder.save_array("qk_head_accuracy", [[0.5, 0.25]])
    path = root / "corrupt" / "results.json"
    path.write_text(path.read_text()[:20])
    shutil.copytree(root / "good", root / "noconfig")  # its config.yaml deleted
    (root / "noconfig" / "config.yaml").unlink()
    (root / "noconfig" / "results.json").unlink()
