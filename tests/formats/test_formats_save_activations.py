"""``formats --save-activations``: the MCQ prompt's rows and every free answer's generated-token
rows, samples unchanged, read by safetensors alone."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1]))
from whitebox_eval.formats import study as fs  # noqa: E402
from whitebox_eval.internals import Capture, Engine, batch_from_ids  # noqa: E402
from whitebox_eval.internals.generation import generate  # noqa: E402
from whitebox_eval.tasks.prompts import render_prompt  # noqa: E402
from tiny_models import tiny_formats_llama  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    return tiny_formats_llama()


def test_prompt_and_generated_rows(tiny, tmp_path):
    from safetensors.numpy import load_file

    base = dict(model="tiny", task="arithmetic:add1,mul1", limit=3, n_samples=2, max_new_tokens=3, n_bins=2,
                batch_size=2, shots=1)
    cfg = fs.FormatsConfig(**base, save_activations=("resid:1:last", "mlp_out:0:generated", "attn_out:0:all"))
    folder = fs.run_formats(cfg, tmp_path, run_id="s", loaded=tiny, show_progress=False)
    plain = fs.run_formats(fs.FormatsConfig(**base), tmp_path, run_id="p", loaded=tiny, show_progress=False)
    assert (folder.path / "samples.jsonl").read_bytes() == (plain.path / "samples.jsonl").read_bytes()
    res = folder.load_results()["activations"]
    assert res["resid-last"]["item_shape"] == [1, 1, 32] and res["resid-last"]["tensors"] == 3
    assert res["mlp_out-generated"]["tensors"] == 3 * 2 * 2 and res["mlp_out-generated"]["key"].startswith("<sample id>")
    last = load_file(str(folder.path / "activations" / "resid-last.safetensors"))
    gen = load_file(str(folder.path / "activations" / "mlp_out-generated.safetensors"))
    every = load_file(str(folder.path / "activations" / "attn_out-all.safetensors"))
    data = fs.load_format_items(cfg)
    engine = Engine(tiny)
    for s in folder.read_samples():
        it = next(x for x in data.items if x.id == s["id"])
        ids = tiny.tokenizer(render_prompt(it, fmt="mcq_plain", demos=data.demos).text)["input_ids"]
        with torch.no_grad():
            want = engine.run(batch_from_ids([ids]), [Capture("resid", "last", [1])])["resid"][0].numpy()
        np.testing.assert_allclose(last[str(s["id"])], want, atol=1e-5, rtol=1e-5)  # after a cached prefix
        with torch.no_grad():
            full = engine.run(batch_from_ids([ids]), [Capture("attn_out", "all", [0])])["attn_out"][0].numpy()
        assert every[str(s["id"])].shape == full.shape  # the demonstrations' rows first, then the question's
        np.testing.assert_allclose(every[str(s["id"])], full, atol=1e-5, rtol=1e-5)
        for f in fs.FREE_FORMATS:
            x = gen[f"{s['id']}/{f}/0"]
            assert x.shape[0] == 1 and 1 <= x.shape[1] <= 3 and x.shape[2] == 32
            prompt = tiny.tokenizer(s["prompts"][f])["input_ids"]
            seed = fs.stream_seed(cfg.seed, s["id"], f)
            g = generate(engine, [prompt], max_new_tokens=3, n_samples=2, do_sample=True, seeds=[seed],
                         stop_strings=["\n"], captures=[Capture("mlp_out", layers=[0])])
            assert np.array_equal(x, g[0].captures["mlp_out"].numpy())


def test_cli_refuses_a_bad_spec_before_any_model_work(tmp_path, cli):
    out = tmp_path / "runs"
    code, _, err = cli(["formats", "--save-activations", "resid:1:nowhere", "--output", str(out)])
    assert code == 2 and "unknown positions 'nowhere'" in err, err
    code, _, err = cli(["formats", "--help"])
    assert "--save-activations" in _ and "generated" in _
    assert not out.exists()


def test_cli_refuses_a_layer_outside_the_model_before_loading_it(tmp_path, cli):
    code, _, err = cli(["formats", "--save-activations", "resid:30:last", "--output", str(tmp_path)])
    assert code == 2 and "layer 30 is outside this model (30 layers, from 0)" in err, err
    assert not any(tmp_path.iterdir())
