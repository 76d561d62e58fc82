"""``gar --edit``: every pass of a mode under the edits, recorded in config.yaml;
``--edit at:WHERE`` is where gar's own interventions edit (``--edit-at`` its older spelling)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.command import split_edit_at
from whitebox_eval.gar.evaluate_study import GARConfig, run_gar

TASKS = "GendersOfPersons/same,CountriesOfCities/same×3"


def test_an_ablated_evaluation_records_its_edit_and_moves_the_probabilities(tmp_path, tiny_real_vocab):
    plain = run_gar(GARConfig(model="tiny", tasks=TASKS, limit=2), tmp_path, run_id="plain", loaded=tiny_real_vocab)
    cfg = GARConfig(model="tiny", tasks=TASKS, limit=2, edits=("ablate:0.0,L1H2", "neurons:0:3,7"))
    edited = run_gar(cfg, tmp_path, run_id="edited", loaded=tiny_real_vocab)
    assert yaml.safe_load((edited.path / "config.yaml").read_text())["edits"] == ["ablate:0.0,L1H2", "neurons:0:3,7"]
    assert "edits" not in yaml.safe_load((plain.path / "config.yaml").read_text())
    a = [s["target_prob"] for s in plain.read_samples()]
    b = [s["target_prob"] for s in edited.read_samples()]
    assert len(a) == len(b) and not np.allclose(a, b)


def test_bad_edits_write_nothing(tmp_path, tiny_real_vocab):
    with pytest.raises(WhiteboxError, match="head 1.9 is outside"):
        run_gar(GARConfig(model="tiny", tasks=TASKS, limit=2, edits=("ablate:1.9",)), tmp_path, run_id="x",
                loaded=tiny_real_vocab)
    assert not (tmp_path / "x").exists()


def test_edit_at_folds_into_edit():
    assert split_edit_at(("at:pattern", "ablate:1.0"), None) == (("ablate:1.0",), "pattern")
    assert split_edit_at(("ablate:1.0",), "both") == (("ablate:1.0",), "both")
    assert split_edit_at((), None) == ((), "read")
    assert split_edit_at(("at:both",), "both") == ((), "both")
    with pytest.raises(WhiteboxError, match="name two places"):
        split_edit_at(("at:pattern",), "read")
    with pytest.raises(WhiteboxError, match="at:read, at:pattern or at:both"):
        split_edit_at(("at:end",), None)


def test_the_command_line_reads_at_as_gars_own(cli, tmp_path):
    """``--edit at:...`` reaches gar's own reading (the shared --edit check leaves it alone), and the
    other specs are still read by the shared one, before anything runs."""
    code, _, err = cli(["gar", "--mode", "truth-heads", "--edit", "at:end", "--output", str(tmp_path)])
    assert code == 2 and "gar's interventions edit at:read, at:pattern or at:both" in err, err
    code, _, err = cli(["gar", "--mode", "truth-heads", "--edit", "at:pattern", "--edit", "zap:1",
                        "--output", str(tmp_path)])
    assert code == 2 and "unknown edit 'zap'" in err, err
    assert not any(tmp_path.iterdir())


def test_an_attention_edit_is_counted_on_the_prompts_before_the_folder(tmp_path, tiny_real_vocab):
    """Coverage: a position past every prompt writes nothing; one past some is recorded."""
    from whitebox_eval.gar.roles import encode_examples
    from whitebox_eval.gar.selection import select_tasks, task_examples

    cfg = GARConfig(model="tiny", tasks=TASKS, limit=2)
    lengths = [e.n_tokens for e in encode_examples(task_examples(select_tasks(cfg.tasks, include_kr=cfg.include_kr),
                                                                 cfg.limit, cfg.seed), tiny_real_vocab.tokenizer)]
    assert min(lengths) < max(lengths)
    with pytest.raises(WhiteboxError, match=f"fall in none of the {len(lengths)} prompts"):
        run_gar(GARConfig(model="tiny", tasks=TASKS, limit=2, edits=(f"attn:0.0:{max(lengths)}>first:force",)),
                tmp_path, run_id="none", loaded=tiny_real_vocab)
    assert not (tmp_path / "none").exists()
    spec = f"attn:0.0:all>{min(lengths)}:force"  # a key past the shortest prompts (key side)
    folder = run_gar(GARConfig(model="tiny", tasks=TASKS, limit=2, edits=(spec,)), tmp_path, run_id="some",
                     loaded=tiny_real_vocab)
    assert yaml.safe_load((folder.path / "config.yaml").read_text())["edit_coverage"] == {
        spec: {"covered": sum(n > min(lengths) for n in lengths), "items": len(lengths)}}


def test_the_probe_modes_count_an_attention_edit_on_their_statements(tmp_path, tiny_real_vocab):
    """Coverage in the probe and truth-heads modes: counted on the statements (and, in
    truth-heads, the examples' prompts) they score, before the run folder."""
    from whitebox_eval.gar.probe_study import GARProbeConfig, load_probe_files, run_gar_probe
    from whitebox_eval.gar.truth_heads import GARHeadsConfig, run_gar_heads
    from whitebox_eval.tasks.token_spans import char_offsets

    rows = [(f"The city of {'Big ' * (i % 3)}Town{i} is in Country{i}.", i % 2) for i in range(12)]
    got = tmp_path / "got.csv"
    got.write_text("statement,label\n" + "".join(f"{s},{y}\n" for s, y in rows))
    statements = load_probe_files([str(got)], limit=None, seed=0, on_bad_row="error")[0][str(got)]  # as prompted
    lengths = [len(char_offsets(tiny_real_vocab.tokenizer, st.text)[0]) for st in statements]
    assert min(lengths) < max(lengths)
    probe = dict(model="tiny", heads="1.0,1.3", probe_data=(str(got),), probe_folds=2, random_draws=0)
    with pytest.raises(WhiteboxError, match=f"fall in none of the {len(rows)} prompts"):
        run_gar_probe(GARProbeConfig(**probe, edits=(f"attn:0.0:{max(lengths)}>first:force",)), tmp_path,
                      run_id="none", loaded=tiny_real_vocab)
    assert not (tmp_path / "none").exists()
    spec = f"attn:0.0:all>{min(lengths)}:force"  # a key past the shortest statements
    folder = run_gar_probe(GARProbeConfig(**probe, edits=(spec,)), tmp_path, run_id="some", loaded=tiny_real_vocab)
    assert yaml.safe_load((folder.path / "config.yaml").read_text())["edit_coverage"] == {
        spec: {"covered": sum(n > min(lengths) for n in lengths), "items": len(lengths)}}
    with pytest.raises(WhiteboxError, match="fall in none of the"):  # past every statement and prompt
        run_gar_heads(GARHeadsConfig(model="tiny", tasks="GendersOfPersons/same,KindsOfThings/kindOf×3 [g2c]", limit=4, probe_data=(str(got),),
                                     edits=("attn:0.0:400>first:force",)), tmp_path, run_id="heads",
                      loaded=tiny_real_vocab)
    assert not (tmp_path / "heads").exists()
