"""A study states its passes up front, so progress says "pass k of N" with
the study's time left; a model loading says so; ``--adapter`` prints no transformers
FutureWarning (and only that warning is silenced)."""

from __future__ import annotations

import io
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from whitebox_eval.runs import RunFolder  # noqa: E402
from whitebox_eval.runs.pass_plan import PassPlan, extend_plan, plan_of, plan_passes  # noqa: E402
from whitebox_eval.runs.passes import run_pass  # noqa: E402
from gar.conftest import tiny_real_vocab, tokenizer  # noqa: E402,F401  (the gar tests' tiny model)


def test_the_overall_estimate_is_time_per_item_times_items_left(tmp_path):
    now = [0.0]
    plan = PassPlan(tmp_path, [("a", 10), ("b", 20), ("c", 10)], clock=lambda: now[0])
    assert plan.begin("a", 10) == "pass 1 of 3: a, 10 items to compute"  # nothing computed: no estimate yet
    now[0] = 10.0
    assert plan.after(5, 10, 10.0) == ", overall about 1:10 left"  # 5 done in 10 s: 35 left x 2 s
    now[0] = 20.0
    plan.end("a")
    assert plan.begin("b", 20) == "pass 2 of 3: b, 20 items to compute; overall about 1:00 left"  # 30 x 2 s
    now[0] = 60.0
    plan.end("b")
    # a resumed pass with nothing left is not counted as work on either side
    assert plan.begin("c", 0).endswith("overall about 0:00 left")
    assert plan.label("d") is None and plan.begin("d", 4) is None


def test_run_pass_says_pass_k_of_n_and_a_pass_out_of_plan_stays_plain(tmp_path, monkeypatch):
    monkeypatch.setenv("WHITEBOX_PROGRESS", "lines")
    monkeypatch.setattr("sys.stderr", io.StringIO())
    folder = RunFolder.create(tmp_path, {"suite": "t"}, run_id="r")
    plan_passes(folder, [("first", 4), ("second", 4), ("never", 0)])
    assert [n for n, _ in plan_of(folder).passes] == ["first", "second"]  # a pass with no items is left out

    def score(idx):
        return None, {"x": np.ones((len(idx), 2))}

    for name in ("first", "second", "extra"):
        run_pass(folder, name, list(range(4)), 2, score, collect=False)
    lines = sys.stderr.getvalue().splitlines()
    assert "pass 1 of 2: first, 4 items to compute" in lines
    assert any(line.startswith("pass 2 of 2: second, 4 items to compute; overall about") for line in lines)
    assert any(line.startswith("pass 2 of 2 second: 2/2 (100%)") and "overall about" in line for line in lines)
    assert [line for line in lines if "extra" in line][0].startswith("extra: 1/2")
    extend_plan(folder, [("extra", 4)])
    assert plan_of(folder).label("extra") == "pass 3 of 3"
    assert plan_of(tmp_path / "elsewhere") is None  # a plan is its folder's only


def test_mcqa_runs_every_pass_of_its_plan_and_no_other(tmp_path, monkeypatch):
    from tiny_models import tiny_llama_with_bpe
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa
    from whitebox_eval.tasks.prompts import render_prompt
    from whitebox_eval.tasks.ssd import make_ssd

    monkeypatch.setenv("WHITEBOX_PROGRESS", "off")
    lm = tiny_llama_with_bpe([render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)], 400)
    cfg = MCQAConfig(model="tiny", limit=16, min_val_items=6, batch_size=8, ablation_draws=2,
                     methods=("baseline", "qk", "attention", "pa", "pride", "ablation", "cloze"))
    folder = run_mcqa(cfg, tmp_path, run_id="m", loaded=lm)  # stderr off, run.log on
    log = (folder.path / "run.log").read_text()
    starts = [line.split("Z ", 1)[1] for line in log.splitlines() if ": pass " not in line and " pass " in line
              and "items to compute" in line]
    names = [s.split(": ")[1].split(",")[0] for s in starts]
    assert names == ["main", "rows", "perm", "pride", "ablate_top", "ablate_random0", "ablate_random1", "cloze"]
    assert all(s.startswith(f"pass {k} of 8: ") for k, s in enumerate(starts, 1))
    parts = {p.name for p in (folder.path / "arrays" / "parts").iterdir()}
    assert set(names) <= parts


def test_a_model_loading_says_so(tmp_path, monkeypatch):
    from tiny_models import tiny_folder
    from whitebox_eval.models.loading import load_model

    monkeypatch.setenv("WHITEBOX_PROGRESS", "lines")
    base = tiny_folder("llama", tmp_path / "base")
    run = RunFolder.create(tmp_path / "runs", {"suite": "t"}, run_id="r")  # a run shows the loader's lines
    monkeypatch.setattr("sys.stderr", io.StringIO())
    load_model(str(base), dtype="float32", device="cpu")
    err = sys.stderr.getvalue()
    assert f"loading {base} (float32) ..." in err and f"loaded {base} in " in err
    assert f"loading {base} (float32)" in (run.path / "run.log").read_text()


def test_an_adapter_prints_no_future_warning_and_others_still_show(tmp_path):
    pytest.importorskip("peft")
    sys.path.insert(0, str(Path(__file__).parents[1] / "models"))
    from test_load_options import _adapter
    from tiny_models import tiny_folder
    from whitebox_eval.models import load_options as lo
    from whitebox_eval.models.loading import load_model

    base = tiny_folder("llama", tmp_path / "base")
    adapter = _adapter(base, tmp_path / "lora")
    for mode in ("merge", "keep"):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            load_model(str(base), dtype="float32", device="cpu", options=lo.LoadOptions(adapter=str(adapter), adapter_mode=mode))
        future = [str(w.message) for w in seen if issubclass(w.category, FutureWarning)]
        assert not future, (mode, future)
    with warnings.catch_warnings(record=True) as seen:  # the filter ends with the adapter's loading
        warnings.simplefilter("always")
        warnings.warn("`is_gradient_checkpointing` is deprecated (raised here)", FutureWarning)
    assert len(seen) == 1


def _started(folder) -> list[str]:
    """The passes a run started, in order, each checked to say ``pass k of N``: k counts up, N is the
    plan's so far (it grows where a study learns of passes as it goes) and ends at every pass run."""
    log = (folder.path / "run.log").read_text()
    starts = [line.split("Z ", 1)[1] for line in log.splitlines() if ": pass " not in line and " pass " in line
              and "items to compute" in line]
    of = [int(s.split(" of ", 1)[1].split(":")[0]) for s in starts]
    assert all(s.startswith(f"pass {k} of ") for k, s in enumerate(starts, 1)), starts
    assert of == sorted(of) and of[-1] == len(starts), starts
    return [s.split(": ")[1].split(",")[0] for s in starts]


def test_gar_truth_heads_attribute_and_probe_and_mui_masking_state_their_plans(tmp_path, monkeypatch,
                                                                              tiny_real_vocab):
    """Every pass these studies run is a pass of their plan, numbered k of N (N: every pass run)."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "mui"))
    from mui_testing import tiny_lm
    from whitebox_eval.gar.attribute_study import GARAttributeConfig, run_gar_attribute
    from whitebox_eval.gar.probe_study import GARProbeConfig, run_gar_probe
    from whitebox_eval.gar.truth_heads import GARHeadsConfig, run_gar_heads
    from whitebox_eval.mui.masking import MaskingConfig, run_masking

    monkeypatch.setenv("WHITEBOX_PROGRESS", "off")
    lm = tiny_real_vocab
    got = tmp_path / "got.csv"
    got.write_text("statement,label\n" + "".join(f"The city of Town{i} is in Country{i % 3}.,{i % 2}\n"
                                                  for i in range(12)))
    heads = run_gar_heads(GARHeadsConfig(model="tiny", tasks="GendersOfPersons/same,KindsOfThings/kindOf×3 [g2c]",
                                         limit=8, steps=1, n_candidates=4, random_draws=2, probe_data=(str(got),),
                                         probe_folds=2, batch_size=4), tmp_path, run_id="h", loaded=lm)
    assert _started(heads) == ["base", "attr", "tf", "inv", "strong", "weak", "knockout", "rand0", "rand1",
                               "invrand0", "invrand1", "probe-got"]
    two = "GendersOfPersons/same,CountriesOfCities/same×3"
    attribute = run_gar_attribute(GARAttributeConfig(model="tiny", tasks=two, limit=2, steps=1), tmp_path,
                                  run_id="a", loaded=lm)
    assert _started(attribute) == ["attribute"]
    probe = run_gar_probe(GARProbeConfig(model="tiny", heads="1.0", probe_data=(str(got),), probe_folds=2,
                                         random_draws=0), tmp_path, run_id="p", loaded=lm)
    assert _started(probe) == ["probe-got"]
    masking = run_masking(MaskingConfig(model="tiny", source_task="arithmetic-gen:add1", eval_tasks=("ssd",), ks=(1,),
                                        limit=3, batch_size=3, max_new_tokens=3, random_draws=1),
                          tmp_path, run_id="m", loaded=tiny_lm("llama"))
    assert _started(masking) == ["source", "masking"]
