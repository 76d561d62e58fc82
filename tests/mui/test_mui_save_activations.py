"""``mui --save-activations``: each response's generated-token rows from the decoder's own
passes, samples unchanged, given responses refused in one line."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from mui_testing import tiny_lm  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.internals import Capture, Engine  # noqa: E402
from whitebox_eval.internals.generation import generate  # noqa: E402
from whitebox_eval.mui.responses import prepare_task  # noqa: E402
from whitebox_eval.mui.study import MUIConfig, run_mui  # noqa: E402

BASE = dict(model="tiny", task="arithmetic-gen:add1,mul1", limit=2, batch_size=2, max_new_tokens=4,
            threshold="topk", threshold_value=2)


def test_generated_rows_equal_the_decoder_and_samples_do_not_change(tmp_path):
    from safetensors.numpy import load_file

    lm = tiny_lm("llama")
    cfg = MUIConfig(**BASE, save_activations=("mlp_act:1:generated", "blocks.0.hook_resid_post:last"))
    folder = run_mui(cfg, tmp_path, run_id="s", loaded=lm)
    plain = run_mui(MUIConfig(**BASE), tmp_path, run_id="p", loaded=lm)
    assert (folder.path / "samples.jsonl").read_bytes() == (plain.path / "samples.jsonl").read_bytes()
    res = folder.load_results()["activations"]
    assert res["mlp_act-generated"]["tensors"] == 2 and res["resid-last"]["item_shape"][:2] == [1, 1]
    gen = load_file(str(folder.path / "activations" / "mlp_act-generated.safetensors"))
    last = load_file(str(folder.path / "activations" / "resid-last.safetensors"))
    task = prepare_task(cfg, lm.tokenizer)
    items = task.items  # one batch of 2, as the study's
    g = generate(Engine(lm), [task.prompt(it, lm.tokenizer) for it in items], max_new_tokens=4,
                 stop_strings=list(task.settings(items[0])[0]),
                 captures=[Capture("mlp_act", layers=[1], name="a"), Capture("resid", layers=[0], name="r")])
    assert len(items) == 2 and sorted(gen) == sorted(str(it.id) for it in items)
    for it, x in zip(items, g):
        assert np.array_equal(gen[str(it.id)], x.captures["a"].numpy())
        assert np.array_equal(last[str(it.id)], x.captures["r"][:, :1].numpy())


def test_given_responses_and_bad_positions_are_one_line(tmp_path):
    with pytest.raises(WhiteboxError, match="no 'options' positions"):
        MUIConfig(**BASE, save_activations=("resid:options",))
    with pytest.raises(WhiteboxError, match="nothing is generated"):
        run_mui(MUIConfig(**BASE, responses="gold", save_activations=("resid:generated",)), tmp_path, run_id="g",
                loaded=tiny_lm("llama"))
    assert not (tmp_path / "g").exists()


def test_cli_refuses_bad_specs_before_any_model_work(tmp_path, cli):
    code, _, err = cli(["mui", "--task", "arithmetic-gen", "--save-activations", "resid:99:generated", "--output", str(tmp_path)])
    assert code == 2 and "layer 99 is outside this model (30 layers, from 0)" in err, err
    code, _, err = cli(["mui", "--task", "arithmetic-gen", "--save-activations", "attn:1", "--output", str(tmp_path)])
    assert code == 2 and "has no single vector per token" in err, err
    assert not any(tmp_path.iterdir())


def test_all_rows_are_the_prompt_then_the_generated_rows(tmp_path):
    """``all``: the prompt's rows, then each generated token's but the last; its tail from the
    prompt's last token is ``generated`` bit for bit, and the whole equals one uncached pass over
    prompt + response (float32: the cached and uncached sums differ in rounding only)."""
    import torch
    from safetensors.numpy import load_file

    from whitebox_eval.internals import batch_from_ids

    lm = tiny_lm("llama")
    cfg = MUIConfig(**BASE, save_activations=("mlp_act:1:all", "mlp_act:1:generated"))
    folder = run_mui(cfg, tmp_path, run_id="a", loaded=lm)
    every = load_file(str(folder.path / "activations" / "mlp_act-all.safetensors"))
    gen = load_file(str(folder.path / "activations" / "mlp_act-generated.safetensors"))
    task = prepare_task(cfg, lm.tokenizer)
    samples = {s["id"]: s for s in folder.read_samples()}
    engine = Engine(lm)
    for it in task.items:
        key, prompt = str(it.id), task.prompt(it, lm.tokenizer)
        g = gen[key].shape[1]  # generated tokens
        assert every[key].shape[1] == len(prompt) + g - 1
        assert np.array_equal(every[key][:, len(prompt) - 1:], gen[key])
        out = generate(engine, [prompt], max_new_tokens=4, stop_strings=list(task.settings(it)[0]))[0]
        assert lm.tokenizer.decode(out.ids).startswith(samples[it.id]["response"])  # the run's greedy response
        ids = prompt + out.ids[:g - 1]
        with torch.no_grad():
            ref = engine.run(batch_from_ids([ids]), [Capture("mlp_act", "all", [1])], logits=False)["mlp_act"][0]
        np.testing.assert_allclose(every[key], ref.numpy(), atol=1e-5)


def test_the_decoder_reads_every_prompt_row_of_padded_prompts():
    """generate(captures=[... "all"]): each prompt's rows, padding dropped, then its generated rows;
    samples repeated from one prefill keep their own prompt's rows."""
    import torch

    from whitebox_eval.internals import batch_from_ids

    lm = tiny_lm("llama")
    engine = Engine(lm)
    prompts = [[5, 9, 2, 7, 3], [4, 6]]
    out = generate(engine, prompts, max_new_tokens=3, stop_ids=[], n_samples=2, do_sample=True, seeds=[1, 2],
                   captures=[Capture("resid", "all", [0], name="r")])
    for i, g in enumerate(out):
        p = prompts[i // 2]
        assert g.captures["r"].shape[1] == len(p) + len(g.ids) - 1
        with torch.no_grad():
            ref = engine.run(batch_from_ids([p]), [Capture("resid", "all", [0])], logits=False)["resid"][0]
        np.testing.assert_allclose(g.captures["r"][:, :len(p)].numpy(), ref.numpy(), atol=1e-5)
