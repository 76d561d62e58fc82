"""The training experiments end to end at micro scale on a tiny random model: 003 fine-tunes
each task before evaluating (claims read the fine-tuned stages), 001's contamination
experiment trains on GSM8K's items and reads MUI per checkpoint; a second reproduction with
the same settings trains nothing (the cached weights are reused)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))
from cases import build_fixtures  # noqa: E402

from whitebox_eval import studies  # noqa: E402
from whitebox_eval.models import training  # noqa: E402
from whitebox_eval.reproduce import plan, spec, verdicts  # noqa: E402

CONTAMINATION_CLAIMS = {"contamination-raises-accuracy-gsm8k", "contamination-raises-mui-gsm8k",
                        "contamination-lowers-accuracy-arc", "contamination-lowers-mui-arc",
                        "contamination-lowers-accuracy-mmlu", "contamination-lowers-mui-mmlu"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(build_fixtures(tmp_path_factory.mktemp("cpu")) / "tiny")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        root = tmp_path_factory.mktemp("cache")
        mp.setenv("WHITEBOX_EVAL_CACHE", str(root))
        yield root


def _claims(r, paper: str) -> dict[str, dict]:
    return {c["id"]: c for p in r.content["papers"] if p["number"] == paper for c in p["claims"]}


def test_cpu_scale_fine_tunes_where_quick_does_not():
    p = spec.papers()["003"]
    for e in p.experiments:
        quick, cpu = plan.settings_for(e, "quick", {}, {}), plan.settings_for(e, "cpu", {}, {})
        assert not quick.get("finetune_examples") and cpu["finetune_examples"] > 0, e.id
        # besides fine-tuning, cpu draws 20 random head sets where quick draws 3 (a control's rank test
        # needs >= 20 draws to reach p < 0.05)
        assert {k: v for k, v in cpu.items() if k not in ("finetune_examples", "finetune", "random_draws")} == \
            {k: v for k, v in quick.items() if k != "random_draws"}, e.id
        assert cpu.get("random_draws", 20) == 20 and quick.get("random_draws", 3) == 3, e.id
    contamination = spec.papers()["001"].experiment("contamination")
    assert plan.points(contamination, "quick") == [] and plan.points(contamination, "cpu") == [{}]


def test_a_claim_not_tested_at_quick_is_not_tested_at_cpu_where_cpu_runs_quicks_settings():
    import yaml

    from whitebox_eval.reproduce.plan import not_tested_at

    # 001's masking has cpu settings of its own (20 random draws): its file without them
    from importlib import resources

    doc = yaml.safe_load((resources.files("whitebox_eval.reproduce") / spec.PAPERS_DIR / "001_mui.yaml")
                         .read_text(encoding="utf-8"))
    masking = next(e for e in doc["experiments"] if e["id"] == "masking")
    masking["scales"].pop("cpu")
    claim = next(c for c in doc["claims"] if c["id"] == "masking-key-below-random-accuracy")
    claim["not_at"].pop("cpu")
    p = spec.parse_paper(doc, "001_mui.yaml without masking's cpu settings")
    c = next(c for c in p.claims if c.id == "masking-key-below-random-accuracy")
    assert "quick" in c.not_at and "cpu" not in c.not_at
    assert plan.scale_named(p.experiment(c.experiment), "cpu") == "quick"  # no cpu settings of its own
    assert not_tested_at(p, c, "quick").startswith("not tested at the quick scale: ")
    assert not_tested_at(p, c, "cpu").startswith("not tested at the cpu scale (its experiment runs the quick "
                                                  "scale's settings): ")
    assert not_tested_at(p, c, "paper") is None
    assert not_tested_at(p, next(c for c in p.claims if c.id == "masking-key-below-random-logprob"), "cpu") is None


def test_003_fine_tunes_then_evaluates_and_a_second_call_reuses_the_weights(tiny, cache, tmp_path, shared_datasets):
    before = len(training.TRAINED)
    r = studies.reproduce("003", tmp_path / "one", models=[tiny], scale="micro", data_root=str(shared_datasets),
                          show_progress=False)
    trained = len(training.TRAINED) - before
    assert trained == 3  # string reversal, value assignment, long addition
    folders = sorted((r.folder / "runs").iterdir())
    for f in folders:
        res = json.loads((f / "results.json").read_text())
        assert res["phase"] == "finetuned" and res["finetune"]["steps"] == 2
        assert "finetuned/ood" in res["stages"]
    claims = _claims(r, "003")
    clustered = claims["errors-attend-less-string-reversal"]
    assert "finetuned/ood" in json.dumps(clustered.get("statistic", {})) or clustered["verdict"] in (
        verdicts.UNINFORMATIVE, verdicts.NOT_TESTED)
    gap = claims["ood-below-id-string-reversal"]
    if "statistic" in gap:
        assert "finetuned/ood" in gap["statistic"]["source"]
    table2 = next(t for p in r.content["papers"] for t in p["tables"] if t["id"] == "table2")
    cells = json.dumps([row["ours"] for row in table2["our_rows"]])
    assert "stages/finetuned/ood/correct_vs_error" in cells and "stages/base/ood" not in cells
    # another reproduction folder, nothing to copy from: the children run again, the training is reused
    again = studies.reproduce("003", tmp_path / "two", models=[tiny], scale="micro", data_root=str(shared_datasets),
                              show_progress=False)
    assert len(training.TRAINED) - before == trained
    logs = [(f / "run.log").read_text() for f in sorted((again.folder / "runs").iterdir())]
    assert all("reused from the cache" in log for log in logs)
    assert _claims(again, "003") == claims


def test_001_contamination_end_to_end(tiny, cache, tmp_path, shared_datasets):
    before = len(training.TRAINED)
    r = studies.reproduce("001", tmp_path / "one", models=[tiny], scale="micro", data_root=str(shared_datasets),
                          show_progress=False)
    assert len(training.TRAINED) - before == 1
    claims = _claims(r, "001")
    assert CONTAMINATION_CLAIMS <= set(claims)
    for cid in CONTAMINATION_CLAIMS:
        c = claims[cid]
        assert c["verdict"] in verdicts.VERDICTS
        if "mmlu" in cid:  # micro evaluates ARC only out of domain
            assert c["verdict"] in (verdicts.NOT_TESTED, verdicts.NOT_RUN), c
        else:
            assert c["verdict"] != verdicts.NOT_RUN and c.get("statistic", {}).get("n") == 4, c
    gsm = claims["contamination-raises-accuracy-gsm8k"]["statistic"]
    assert gsm["test"] == "mcnemar_exact" and gsm["ci_method"] == "exact_cp_product"
    assert claims["contamination-raises-mui-gsm8k"]["statistic"]["test"] == "jackknife"
    child = next(f for f in (r.folder / "runs").iterdir() if f.name.startswith("contamination-"))
    res = json.loads((child / "results.json").read_text())
    assert res["checkpoints"] == ["step-0", "step-2", "step-4"]
    assert {"direction,gsm8k", "direction,arc"} <= set(res["headline"])
