"""Bad input ends in one line naming the fix (exit status 2); the data rule; the plan."""

from __future__ import annotations

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.reproduce import data, plan, prepare, spec


def test_unknown_paper_names_the_choices(cli):
    code, out, err = cli(["reproduce", "007", "--plan-only"])
    assert code == 2
    assert err.strip().count("\n") == 0
    assert "unknown paper '007'" in err and "000 (wise-few)" in err and "or all" in err


def test_a_missing_benchmark_names_the_data_option(cli, tmp_path):
    (tmp_path / "triviaqa").mkdir()  # present but empty: no data file in it
    code, _, err = cli(["reproduce", "first-token", "--plan-only", "--data-root", str(tmp_path)])
    assert code == 2 and err.strip().count("\n") == 0
    assert "--data triviaqa=PATH" in err
    code, _, err = cli(["reproduce", "000", "--plan-only", "--data-root", str(tmp_path)])
    assert code == 2 and "--data mmlu=PATH" in err and "paper 000" in err


def test_data_option_errors_are_one_line(cli, tmp_path):
    code, _, err = cli(["reproduce", "004", "--plan-only", "--data", "trivia=x.jsonl"])
    assert code == 2 and "unknown benchmark" in err and "triviaqa" in err
    code, _, err = cli(["reproduce", "004", "--plan-only", "--data", "triviaqa"])
    assert code == 2 and "NAME=PATH" in err
    code, _, err = cli(["reproduce", "004", "--plan-only", "--data", f"triviaqa={tmp_path / 'none.jsonl'}"])
    assert code == 2 and "no such file" in err


def test_data_root_rule(tmp_path, monkeypatch):
    (tmp_path / "triviaqa").mkdir()
    (tmp_path / "triviaqa" / "LICENSE").write_text("x")
    f = tmp_path / "triviaqa" / "t.jsonl"
    f.write_text("{}\n")
    assert data.locate(["triviaqa"], {}, tmp_path) == {"triviaqa": str(f.resolve())}
    (tmp_path / "triviaqa" / "u.jsonl").write_text("{}\n")
    with pytest.raises(WhiteboxError, match="--data triviaqa=PATH"):
        data.locate(["triviaqa"], {}, tmp_path)
    assert data.locate(["triviaqa"], {"triviaqa": str(f)}, tmp_path) == {"triviaqa": str(f.resolve())}
    monkeypatch.setenv(data.ENV, str(tmp_path))
    assert data.data_root(None) == tmp_path
    monkeypatch.setenv(data.ENV, str(tmp_path / "nope"))
    with pytest.raises(WhiteboxError, match="no such folder"):
        data.data_root(None)


def test_papers_by_number_or_name():
    assert [p.number for p in spec.resolve(["0", "mui", "003"])] == ["000", "001", "003"]
    assert len(spec.resolve(["all"])) == 5


def test_plan_names_children_by_settings_and_shares_them(tmp_path):
    f = tmp_path / "triviaqa"
    f.mkdir()
    (f / "t.jsonl").write_text("{}\n")
    plan = prepare(["004"], ["m1", "m2"], "quick", data_root=str(tmp_path))
    assert len(plan.children) == 4 and plan.items > 0 and plan.seconds > 0
    ids = [c.run_id for c in plan.children]
    assert len(set(ids)) == 4 and all(i.startswith("formats-m") for i in ids)
    again = prepare(["004", "first-token"], ["m1", "m2"], "quick", data_root=str(tmp_path))
    assert [c.run_id for c in again.children] == ids  # the same settings, the same names
    lines = plan.lines()  # the head, a line per child, then what the scale says of the claims
    assert "4 runs" in lines[0] and "estimated" in lines[0] and lines[5].startswith("claims at scale quick")


def test_resume_refuses_another_plan(tmp_path):
    import whitebox_eval.reproduce as rep

    folder = tmp_path / "r"
    rep._open_folder(folder, {"papers": ["004"]}, resume=False)
    with pytest.raises(WhiteboxError, match="exists: continue it with --resume"):
        rep._open_folder(folder, {"papers": ["004"]}, resume=False)
    with pytest.raises(WhiteboxError, match="plan in .* differs in papers"):
        rep._open_folder(folder, {"papers": ["000"]}, resume=True)
    rep._open_folder(folder, {"papers": ["004"]}, resume=True)


def test_cpu_scale_takes_quick_settings_where_an_experiment_names_no_cpu_point(tmp_path):
    f = tmp_path / "triviaqa"
    f.mkdir()
    (f / "t.jsonl").write_text("{}\n")
    quick = prepare(["004"], ["m1"], "quick", data_root=str(tmp_path))
    cpu = prepare(["004"], ["m1"], "cpu", data_root=str(tmp_path))
    # the same children, reused (the trained column -- its training and the run on it -- is cpu's own)
    untrained = [c.run_id for c in cpu.children if c.suite != "finetune" and not c.label]
    assert untrained == [c.run_id for c in quick.children] and len(cpu.children) == len(untrained) + 2
    exp = spec.Experiment(id="x", suite="formats", title="t", settings={"limit": 1},
                          scales={"quick": {"limit": 5}, "cpu": {"limit": 50}})
    assert plan.settings_for(exp, "cpu", {}, {})["limit"] == 50 and plan.settings_for(exp, "quick", {}, {})["limit"] == 5
    assert plan.points(exp, "cpu") == [{}] and plan.points(spec.Experiment(id="y", suite="formats", title="t",
                                                           settings={}, scales={"paper": {}}), "cpu") == []


def test_by_model_settings_apply_to_their_model_alone():
    exp = spec.Experiment(id="x", suite="finetune", title="t", settings={"learning_rate": 1e-4, "max_steps": 160},
                          scales={"cpu": {"limit": 50, "by_model": {"a": {"learning_rate": 3e-5, "train_context": 5}}}})
    a, b = (plan.settings_for(exp, "cpu", {}, {}, model=m) for m in ("a", "b"))
    assert a == {"learning_rate": 3e-5, "max_steps": 160, "limit": 50, "train_context": 5}
    assert b == {"learning_rate": 1e-4, "max_steps": 160, "limit": 50} == plan.settings_for(exp, "cpu", {}, {})
    # the committed arithmetic training: SmolLM2's recipe chosen on its validation split, Gemma's as first declared
    for number in ("001", "004"):
        train = spec.papers()[number].experiment("arith-train")
        smol, gemma = (plan.settings_for(train, "cpu", {}, {}, model=m) for m in ("smollm2-135m", "gemma3-270m"))
        assert (smol["train_context"], smol["learning_rate"], smol["max_steps"]) == (5, 3e-5, 340)
        assert "train_context" not in gemma and (gemma["learning_rate"], gemma["max_steps"]) == (1e-4, 160)


def test_cpu_scale_runs_more_items_where_n_limits():
    papers = spec.papers()
    wise, gar = papers["000"], papers["002"]
    ex = {e.id: e for e in wise.experiments}
    ssd = plan.settings_for(ex["ssd"], "cpu", {}, {})
    assert ssd["limit"] - ssd["min_val_items"] >= 700  # a +5-point head effect at 80% power
    for name in ("mmlu", "cosmosqa", "hellaswag", "halueval"):
        e = ex[name + "-{shots}shot"]
        assert plan.points(e, "cpu") == [{"shots": 0}] and plan.settings_for(e, "cpu", {"shots": 0}, {name: "f"})["limit"] is None
        assert "every row" in e.differs_at("cpu") and e.differs_at("quick") == e.differs
    evaluate = {e.id: e for e in gar.experiments}["evaluate"]
    assert plan.settings_for(evaluate, "cpu", {}, {})["limit"] is None and "whole benchmark" in evaluate.differs_at("cpu")
