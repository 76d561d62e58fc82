"""``--save-activations`` on mcqa: the spec language and its one-line refusals, the saved
file against ``Engine.run`` captures of the same batches (bit for bit), read by safetensors
alone, a killed run resumed to the same bytes, samples unchanged."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

sys.path.insert(0, str(Path(__file__).parents[1]))
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.internals import Capture, Engine, batch_from_ids  # noqa: E402
from whitebox_eval.internals.activation_specs import check_activations, parse_activation, parse_activations  # noqa: E402
from whitebox_eval.mcqa.study import MCQAConfig, load_items, run_mcqa  # noqa: E402
from whitebox_eval.runs.activations import ActivationParts, estimate  # noqa: E402
from whitebox_eval.tasks.prompt_tokens import tokenize_prompt  # noqa: E402
from whitebox_eval.tasks.prompts import render_prompt  # noqa: E402
from whitebox_eval.tasks.ssd import make_ssd  # noqa: E402
from tiny_models import tiny_llama_with_bpe  # noqa: E402


@pytest.fixture(scope="module")
def lm():
    texts = [render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)]
    return tiny_llama_with_bpe(texts, 400)


def test_specs_read():
    s = parse_activation("resid:12:last")
    assert (s.point, s.layers, s.positions, s.stem) == ("resid", (12,), "last", "resid-last")
    s = parse_activation("blocks.12.hook_resid_post:last")
    assert (s.point, s.layers, s.positions, s.hook) == ("resid", (12,), "last", "hook_resid_post")
    s = parse_activation("attn_out:0-3,7:all")
    assert (s.point, s.layers, s.positions) == ("attn_out", (0, 1, 2, 3, 7), "all")
    s = parse_activation("mlp_act:all:options")
    assert (s.point, s.layers, s.positions) == ("mlp_act", None, "options")
    assert parse_activation("attn.hook_z").point == "head_out"
    assert parse_activation("hook_mlp_out:2").layers == (2,)


@pytest.mark.parametrize("spec, says", [
    ("resdi:1", "unknown capture point or hook name 'resdi'"),
    ("attn:1", "attn has no single vector per token"),
    ("resid:1:middle", "unknown positions 'middle'"),
    ("resid:x", "layers 'x' are not all, N or A-B,C"),
    ("resid:3-1", "runs backwards"),
    ("resid:1:2:last", "write POINT"),
    (":1", "write POINT"),
    ("blocks.2.hook_resid_post:3:last", "names layer 2"),
    ("attn.hook_result", "not served"),
])
def test_malformed_specs_are_one_line(spec, says):
    with pytest.raises(WhiteboxError, match=says):
        parse_activation(spec)


def test_suite_positions_duplicates_and_layers_out_of_range():
    with pytest.raises(WhiteboxError, match="no 'generated' positions"):
        parse_activations(["resid:generated"], ("last", "all", "options"))
    with pytest.raises(WhiteboxError, match="two specs save resid at last"):
        parse_activations(["resid:0", "resid:1"])
    with pytest.raises(WhiteboxError, match=r"layer 3 is outside this model \(3 layers"):
        check_activations(parse_activations(["resid:1,3"]), 3)


def test_estimate_line():
    total, line = estimate(parse_activations(["resid:0-1:last", "mlp_act:all:last"]), 10, 3, {"resid": 8, "mlp_act": 16},
                           {"last": 1.0}, 4)
    assert total == 10 * 2 * 8 * 4 + 10 * 3 * 16 * 4
    assert line.startswith("--save-activations: 2.5 KiB") and "resid-last 10 x 2 x 1 x 8" in line


CFG = dict(model="tiny", limit=10, min_val_items=4, batch_size=4, methods=("baseline", "qk"), item_views=False)


def _items_tokens(lm, cfg):
    items = load_items(cfg)[:cfg.limit]
    return items, [tokenize_prompt(lm.tokenizer, render_prompt(it, labels=cfg.labels, uncertainty=cfg.uncertainty))
                   for it in items]


def test_saved_file_equals_engine_captures_and_samples_do_not_change(lm, tmp_path, capsys):
    from safetensors.numpy import load_file

    cfg = MCQAConfig(**CFG, save_activations=("resid:1:last", "blocks.0.hook_mlp_out:options", "attn_out:all:all"))
    folder = run_mcqa(cfg, tmp_path, run_id="saved", loaded=lm, show_progress=False)
    assert "--save-activations: " in capsys.readouterr().err
    plain = run_mcqa(MCQAConfig(**CFG), tmp_path, run_id="plain", loaded=lm, show_progress=False)
    assert (folder.path / "samples.jsonl").read_bytes() == (plain.path / "samples.jsonl").read_bytes()
    assert yaml.safe_load((folder.path / "config.yaml").read_text())["save_activations"] == list(cfg.save_activations)
    assert "save_activations" not in yaml.safe_load((plain.path / "config.yaml").read_text())
    res = folder.load_results()["activations"]
    assert res["resid-last"]["item_shape"] == [1, 1, 32] and res["resid-last"]["dtype"] == "float32"
    assert res["attn_out-all"]["item_shape"][1] is None and res["attn_out-all"]["layers"] == [0, 1, 2]
    assert not (folder.path / "arrays" / "parts" / "activations" / "resid-last").exists()
    last = load_file(str(folder.path / "activations" / "resid-last.safetensors"))
    opts = load_file(str(folder.path / "activations" / "mlp_out-options.safetensors"))
    every = load_file(str(folder.path / "activations" / "attn_out-all.safetensors"))
    items, toks = _items_tokens(lm, cfg)
    assert sorted(last) == sorted(str(it.id) for it in items)
    engine = Engine(lm)
    for start in range(0, len(items), cfg.batch_size):  # the study's own batches
        tb = toks[start:start + cfg.batch_size]
        n = max(len(t.label_positions) for t in tb)
        opt = [t.label_positions + [t.label_positions[-1]] * (n - len(t.label_positions)) for t in tb]
        with torch.no_grad():
            tr = engine.run(batch_from_ids([t.input_ids for t in tb], pad_id=lm.pad_id),
                            [Capture("resid", "last", [1]), Capture("mlp_out", opt, [0]), Capture("attn_out", "all")])
        for b, (it, t) in enumerate(zip(items[start:start + cfg.batch_size], tb)):
            assert np.array_equal(last[str(it.id)], tr["resid"][b].numpy())  # bit-identical
            assert np.array_equal(opts[str(it.id)], tr["mlp_out"][b, :, :len(t.label_positions)].numpy())
            real = tr.positions["attn_out"][b] >= 0
            assert every[str(it.id)].shape == (3, len(t.input_ids), 32)
            assert np.array_equal(every[str(it.id)], tr["attn_out"][b][:, real].numpy())


def test_a_killed_run_resumes_to_the_same_file(lm, tmp_path, monkeypatch):
    cfg = MCQAConfig(**CFG, save_activations=("resid:1:last",))
    whole = run_mcqa(cfg, tmp_path, run_id="whole", loaded=lm, show_progress=False)
    write, calls = ActivationParts.write, []

    def dies_on_the_second_batch(self, first, tensors):
        calls.append(first)
        if len(calls) == 2:
            raise KeyboardInterrupt  # as a kill between two batches: the first batch's parts stay
        write(self, first, tensors)

    monkeypatch.setattr(ActivationParts, "write", dies_on_the_second_batch)
    with pytest.raises(KeyboardInterrupt):
        run_mcqa(cfg, tmp_path, run_id="cut", loaded=lm, show_progress=False)
    monkeypatch.setattr(ActivationParts, "write", write)
    parts = tmp_path / "cut" / "arrays" / "parts"
    assert len(list((parts / "activations" / "resid-last").glob("*.safetensors"))) == 1
    assert len(list((parts / "main").glob("*.npz"))) == 1
    resumed = run_mcqa(cfg, tmp_path, run_id="cut", resume=True, loaded=lm, show_progress=False)
    name = "activations/resid-last.safetensors"
    assert (resumed.path / name).read_bytes() == (whole.path / name).read_bytes()
    assert (resumed.path / "samples.jsonl").read_bytes() == (whole.path / "samples.jsonl").read_bytes()
    # resuming a finished run keeps the merged file (its parts are gone)
    (resumed.path / "results.json").unlink()
    again = run_mcqa(cfg, tmp_path, run_id="cut", resume=True, loaded=lm, show_progress=False)
    assert (again.path / name).read_bytes() == (whole.path / name).read_bytes()


def test_cli_refuses_bad_specs_before_writing_anything(tmp_path, cli):
    out = tmp_path / "runs"
    code, _, err = cli(["mcqa", "--save-activations", "resid:99:last", "--limit", "5", "--output", str(out)])
    assert code == 2 and "layer 99 is outside this model (30 layers, from 0)" in err, err
    code, _, err = cli(["mcqa", "--save-activations", "resid:1:generated", "--output", str(out)])
    assert code == 2 and "no 'generated' positions" in err, err
    code, _, err = cli(["mcqa", "--save-activations", "bogus", "--output", str(out)])
    assert code == 2 and "unknown capture point or hook name 'bogus'" in err and err.count("\n") == 1, err
    assert not out.exists() or not any(out.iterdir())


def test_all_positions_under_cached_demonstrations(lm, tmp_path):
    """With shots the demonstrations are a cached prefix: samples stay those of a run without the
    option, and ``all`` still holds every prompt token (the prefix's rows from a pass over it)."""
    from safetensors.numpy import load_file

    base = dict(CFG, shots=2, limit=6)
    folder = run_mcqa(MCQAConfig(**base, save_activations=("resid:0,2:all",)), tmp_path, run_id="a", loaded=lm,
                      show_progress=False)
    plain = run_mcqa(MCQAConfig(**base), tmp_path, run_id="b", loaded=lm, show_progress=False)
    assert (folder.path / "samples.jsonl").read_bytes() == (plain.path / "samples.jsonl").read_bytes()
    saved = load_file(str(folder.path / "activations" / "resid-all.safetensors"))
    from whitebox_eval.tasks.demos import plan_demonstrations

    cfg = MCQAConfig(**base)
    demos, items = plan_demonstrations(cfg.spec, cfg.shots, load_items(cfg), cfg.seed, cfg.on_bad_row, None)
    engine = Engine(lm)
    for it in items[:cfg.limit]:
        t = tokenize_prompt(lm.tokenizer, render_prompt(it, demos=demos.for_item(it)))
        with torch.no_grad():
            full = engine.run(batch_from_ids([t.input_ids]), [Capture("resid", "all", [0, 2])])["resid"][0].numpy()
        assert saved[str(it.id)].shape == full.shape
        np.testing.assert_allclose(saved[str(it.id)], full, atol=1e-4, rtol=1e-4)


def test_bfloat16_is_kept_exactly_as_float32_and_cut_per_item():
    from whitebox_eval.internals.activation_specs import per_item

    x = torch.randn(2, 3, 4, 2, 5).to(torch.bfloat16)  # [B, L, P, heads, head_dim]
    rows = per_item(x, counts=[4, 2])
    assert rows[0].dtype == np.float32 and rows[0].shape == (3, 4, 10) and rows[1].shape == (3, 2, 10)
    assert np.array_equal(rows[1], x[1, :, :2].float().reshape(3, 2, 10).numpy())
    pos = torch.tensor([[-2, -1, 0, 1], [0, 1, 2, 3]])
    assert per_item(x, positions=pos)[0].shape == (3, 2, 10)


def test_a_cloze_only_study_has_no_prompts_to_save(lm, tmp_path):
    with pytest.raises(WhiteboxError, match="cloze-only study has none"):
        run_mcqa(MCQAConfig(**dict(CFG, methods=("cloze",)), save_activations=("resid:last",)), tmp_path, run_id="c",
                 loaded=lm, show_progress=False)
    assert not (tmp_path / "c").exists()
