"""``--batch-size auto``: the memory rule computed by hand, the size recorded, and a run with it
(the CPU's rule, and a GPU's probe whose passes fail above 6 rows) giving the same samples as
an explicit size."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parents[1]))
from float_tolerance import assert_tree_close  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.models.batch_size import AUTO_MAX, AUTO_TOKENS, rule_batch_size  # noqa: E402
from whitebox_eval.models.config_sizes import sizes_of_config  # noqa: E402

SMOL = sizes_of_config(SimpleNamespace(hidden_size=576, num_hidden_layers=30, vocab_size=49152,
                                       num_attention_heads=9, intermediate_size=1536, tie_word_embeddings=True))


def test_rule_by_hand():
    d, L, V, H, F, T = 576, 30, 49152, 9, 1536, AUTO_TOKENS
    weights = (V * d + L * (4 * d * d + 3 * d * F)) * 4
    per_example = T * (L * 4 * (4 * d + 2 * F) + 4 * H * T // L) + 4 * V
    free = weights + 2 * 5 * per_example  # half of what is left holds 5 examples: the power of two is 4
    assert rule_batch_size(SMOL, "float32", free) == 4
    assert rule_batch_size(SMOL, "float32", weights + 2 * 8 * per_example) == 8
    assert rule_batch_size(SMOL, "float32", weights) == 1  # nothing left: still one example
    assert rule_batch_size(SMOL, "float32", 10**15) == AUTO_MAX
    assert rule_batch_size(SMOL, "bfloat16", weights // 2 + 2 * 8 * per_example) == 8  # bf16 weights take half
    with pytest.raises(WhiteboxError, match="give --batch-size N"):
        rule_batch_size(sizes_of_config(SimpleNamespace(vocab_size=10)), "float32", 10**9)


def test_batch_size_option_reads_numbers_and_auto():
    from click.testing import CliRunner

    from whitebox_eval.cli import cli

    for bad, says in (("0", "is not in the range x>=1"), ("many", "not a whole number or 'auto'")):
        out = CliRunner().invoke(cli, ["mcqa", "--batch-size", bad])
        assert out.exit_code == 2 and says in out.output, out.output


def test_auto_gives_the_samples_of_an_explicit_size(tmp_path, cli, monkeypatch):
    import torch
    import transformers

    from tiny_models import tiny_llama_with_bpe
    from whitebox_eval import command_options
    from whitebox_eval.internals import batch_probe
    from whitebox_eval.tasks.prompts import render_prompt
    from whitebox_eval.tasks.ssd import make_ssd

    texts = [render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)]
    lm = tiny_llama_with_bpe(texts, 400)
    model_dir = tmp_path / "tiny"
    lm.model.save_pretrained(model_dir)
    lm.tokenizer.save_pretrained(model_dir)
    runs, errs = {}, {}

    def run(run_id, size):
        code, out, errs[run_id] = cli(["mcqa", "--model", str(model_dir), "--task", "ssd", "--limit", "20",
                                       "--min-val-items", "6", "--methods", "baseline,qk,attention", "--no-item-views",
                                       "--batch-size", size, "--output", str(tmp_path / "runs"), "--run-id", run_id])
        assert code == 0, errs[run_id]
        runs[run_id] = tmp_path / "runs" / run_id

    run("explicit", "3")
    run("auto", "auto")
    assert "--batch-size auto: 64" in errs["auto"]  # a tiny model on the CPU's rule: the cap
    assert yaml.safe_load((runs["auto"] / "config.yaml").read_text())["batch_size"] == AUTO_MAX

    # a GPU's auto: the probe's real passes, out of memory above 6 rows; the weights load once
    monkeypatch.setattr(command_options, "_probes", lambda device: True)
    monkeypatch.setattr(command_options, "_PROBED", {})
    real_pass, loads = batch_probe.probe_pass, []

    def pass_or_out_of_memory(engine, n, tokens):
        if n > 6:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        real_pass(engine, n, tokens)

    monkeypatch.setattr(batch_probe, "probe_pass", pass_or_out_of_memory)
    real_load = transformers.AutoModelForCausalLM.from_pretrained.__func__

    def counted(cls, *a, **kw):
        loads.append(a[0])
        return real_load(cls, *a, **kw)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", classmethod(counted))
    run("probed", "auto")
    assert "--batch-size auto: 6 (the largest batch whose white-box pass" in errs["probed"]
    assert yaml.safe_load((runs["probed"] / "config.yaml").read_text())["batch_size"] == 6
    assert len(loads) == 1  # the probe's model is the run's
    # auto = 64 holds the 20 items in one batch; 3 puts them in 7 padded batches: every prediction,
    # accuracy and text is the same, and scores agree to float32 rounding (a batch's padding and
    # size change the order of the sums inside a matmul, never what it computes)
    def lines(run):
        return [json.loads(x) for x in (runs[run] / "samples.jsonl").read_text().splitlines()]

    def same(a, b, where):
        # letter logits are written rounded to 5 decimals: float32 rounding may flip the last digit
        assert_tree_close(a, b, 1e-5, 1.01e-5, where)

    explicit = lines("explicit")
    assert len(explicit) == 20
    for other in ("auto", "probed"):
        for a, b in zip(lines(other), explicit, strict=True):
            same(a, b, a["id"])


def test_studies_take_auto_and_probe_the_model_they_are_given(tmp_path, monkeypatch):
    """``studies.mcqa(batch_size="auto", loaded=lm)``: the CPU's rule, or on a GPU the probe of that
    very model (nothing loaded again); the size recorded is a number."""
    import torch

    from tiny_models import tiny_llama_with_bpe
    from whitebox_eval import command_options, studies
    from whitebox_eval.internals import batch_probe
    from whitebox_eval.tasks.prompts import render_prompt
    from whitebox_eval.tasks.ssd import make_ssd

    lm = tiny_llama_with_bpe([render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)], 400)
    kw = dict(model="tiny", task="ssd", limit=8, min_val_items=4, methods=("baseline",), item_views=False)
    r = studies.mcqa(tmp_path, run_id="rule", loaded=lm, batch_size="auto", **kw)
    assert r.config["batch_size"] == AUTO_MAX
    monkeypatch.setattr(command_options, "_probes", lambda device: True)
    monkeypatch.setattr(command_options, "_PROBED", {})
    probed = []

    def probe(engine, n, tokens):
        if n > 3:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        probed.append(engine.loaded is lm)

    monkeypatch.setattr(batch_probe, "probe_pass", probe)
    r = studies.mcqa(tmp_path, run_id="probe", loaded=lm, batch_size="auto", **kw)
    assert r.config["batch_size"] == 3 and probed and all(probed)
