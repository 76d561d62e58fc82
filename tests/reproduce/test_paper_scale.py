"""`reproduce --scale paper`: each paper's own models (hub ids cited from its text), --model
PAPER=ID, --models-root, GAR's example counts as planned, and the GPU estimate's rule."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.reproduce import costs, plan as planning, prechecks, prepare, spec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))
from cases import build_fixtures  # noqa: E402

SEEDS = Path(__file__).resolve().parents[3] / "shared" / "seeds"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_fixtures(tmp_path_factory.mktemp("paperscale")) / "tiny"


@pytest.fixture(scope="module")
def models_root(tiny, tmp_path_factory) -> Path:
    """A --models-root holding the tiny random model under every paper's hub id."""
    root = tmp_path_factory.mktemp("models")
    for p in spec.papers().values():
        for m in p.models:
            if m.id and not (root / m.id.replace("/", "--")).exists():
                shutil.copytree(tiny, root / m.id.replace("/", "--"))
    return root


def test_every_paper_names_its_models_with_a_citation():
    for p in spec.papers().values():
        assert p.models, p.number
        seed = (SEEDS / p.seed).read_text(encoding="utf-8") if (SEEDS / p.seed).is_file() else None
        for m in p.models:
            assert re.search(r"(Table|Fig\.|sec\.|App\.) ?\w", m.cite), (p.number, m)
            assert m.id or m.ambiguous, m  # no hub id only with the reason
            if m.id:
                assert costs.shapes(m.id) is not None, m.id  # the plan works offline
            if seed is not None and m.id:
                # the name the text uses: its family and size appear in the seed text
                size = re.search(r"(\d+(?:\.\d+)?)[bB]", m.name.replace("8x7B", "8x7B"))
                assert size and size.group(1) in seed, (p.number, m.name)
    names = {p.number: {m.id for m in p.models} for p in spec.papers().values()}
    assert {"lmsys/vicuna-7b-v1.3", "lmsys/vicuna-13b-v1.3", "lmsys/vicuna-33b-v1.3"} == names["002"]
    assert {"meta-llama/Llama-3.2-1B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", "google/gemma-3-1b-it"} == names["003"]
    assert "meta-llama/Llama-2-7b-hf" in names["000"] and "mistralai/Mixtral-8x7B-v0.1" in names["004"]
    assert sum(i and i.startswith("allenai/OLMo-2-1124-7B") for i in names["001"]) == 8  # App. A.2 Table 3


def test_model_options_paper_scale_and_overrides():
    every, per = spec.parse_model_options(["a/b", "002=x/y", "gar=z", "attention-span=w", "all=v"])
    assert every == ["a/b"] and per["002"] == ["x/y", "z", "v"] and per["003"] == ["w", "v"]
    with pytest.raises(WhiteboxError, match="unknown paper"):
        spec.parse_model_options(["nope=x/y"])
    gar = spec.papers()["002"]
    exp = gar.experiments[0]
    assert [m for m, _ in planning.models_for(gar, exp, "paper", [], {})] == [m.id for m in gar.models]
    assert [m for m, _ in planning.models_for(gar, exp, "quick", [], {})] == list(planning.DEFAULT_MODELS)
    assert planning.models_for(gar, exp, "paper", ["g"], {}) == [("g", None)]
    assert planning.models_for(gar, exp, "paper", ["g"], {"002": ["h"]}) == [("h", None)]
    wise = spec.papers()["000"]
    chosen = dict(planning.models_for(wise, wise.experiment("mmlu-0shot"), "paper", [], {}))
    assert chosen["LLaMA-30B"].startswith("no hub id")  # named ambiguously: not guessed, not run
    ssd = [m for m, _ in planning.models_for(wise, wise.experiment("ssd"), "paper", [], {})]
    assert ssd == ["meta-llama/Llama-2-7b-hf", "meta-llama/Meta-Llama-3-8B"]


def test_models_root_by_folder_name_and_by_mapping_file(tmp_path):
    (tmp_path / "org--name").mkdir()
    (tmp_path / "elsewhere" / "m").mkdir(parents=True)
    (tmp_path / "models.yaml").write_text("other/model: elsewhere/m\n", encoding="utf-8")
    assert planning.local_folder("org/name", tmp_path) == str((tmp_path / "org--name").resolve())
    assert planning.local_folder("other/model", tmp_path) == str((tmp_path / "elsewhere" / "m").resolve())
    assert planning.local_folder("not/there", tmp_path) is None
    assert planning.local_folder("org/name", None) is None
    (tmp_path / "llama-30b-hf").mkdir()
    (tmp_path / "models.yaml").write_text("other/model: elsewhere/m\nLLaMA-30B: llama-30b-hf\n", encoding="utf-8")
    assert planning.local_folder("LLaMA-30B", tmp_path) == str((tmp_path / "llama-30b-hf").resolve())
    assert planning.local_folder("LLaMA-65B", tmp_path) is None  # a name is found by the mapping only
    wise = spec.papers()["000"]
    from whitebox_eval.reproduce.plan import build

    plan = build([wise], [], "paper", {"mmlu": "m", "cosmosqa": "c", "hellaswag": "h", "halueval": "x"},
                 models_root=tmp_path)
    runs = {c.model: c for c in plan.children if "0" in str(c.settings.get("shots"))}
    assert runs["LLaMA-30B"].skip is None and runs["LLaMA-30B"].source.endswith("llama-30b-hf")
    assert runs["LLaMA-65B"].skip.startswith("no hub id")
    with pytest.raises(WhiteboxError, match="no such folder"):
        planning.models_root(str(tmp_path / "missing"))


def test_a_hub_id_without_a_local_folder_names_the_fix(monkeypatch):
    import whitebox_eval.models.loading as loading

    monkeypatch.setattr(loading, "hub_unreachable_reason", lambda: "offline")
    why = prechecks.model_problem("org/absent-model")
    assert "--models-root DIR holding DIR/org--absent-model" in why
    why = prechecks.model_problem("allenai/OLMo-2-1124-7B@stage1-step122000-tokens512B")
    assert "--revision stage1-step122000-tokens512B" in why and "--models-root" in why


def test_gar_truth_heads_at_paper_scale_reports_500_examples():
    """App. E's inverse intervention on 500 examples: the report split of 200 per truth task."""
    from whitebox_eval.gar.selection import select_tasks, task_examples
    from whitebox_eval.gar.truth_heads import split_pairs

    exp = spec.papers()["002"].experiment("truth-heads")
    s = planning.settings_for(exp, "paper", {}, {"snli": "s", "geometry_of_truth": "g"})
    examples = task_examples(select_tasks(s["tasks"], include_kr=False), s["limit"], 0)
    assert len(examples) == 3 * s["limit"] == 600  # no silent cap at the default 16
    _, report = split_pairs(examples, s["select_fraction"], 0)
    assert len(report) == 500
    from whitebox_eval.suites import suite as record

    assert record("gar").estimate("truth-heads", s)[0] >= 600


def test_task_examples_below_the_default_are_its_prefix():
    from whitebox_eval.gar.selection import select_tasks, task_examples

    tasks = select_tasks("truth", include_kr=False)
    full, some, more = (task_examples(tasks, n, 0) for n in (None, 4, 40))
    assert len(full) == 48 and len(some) == 12 and len(more) == 120
    assert [e.prompt for e in some[:4]] == [e.prompt for e in full[:4]]
    assert {e.task_id for e in more} == {t.task_id for t in tasks}
    assert sum(e.label == "Yes" for e in more) == 60


def test_parameter_count_against_transformers_and_published_sizes():
    import transformers as tf

    cfg = tf.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
    model = tf.LlamaForCausalLM(cfg)
    counted = sum(p.numel() for n, p in model.named_parameters() if "norm" not in n)
    shapes = costs.shapes_from_config_json(cfg.to_dict())
    assert costs.parameters(shapes)[0] == counted
    mix = tf.MixtralConfig(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)
    counted = sum(p.numel() for n, p in tf.MixtralForCausalLM(mix).named_parameters()
                  if "norm" not in n and "gate.weight" not in n.replace("gate_proj", ""))
    assert costs.parameters(costs.shapes_from_config_json(mix.to_dict()))[0] == counted
    # published sizes: Llama-2-7B 6.74B, Mixtral-8x7B 46.7B (12.9B active), Llama-3-70B 70.6B
    for model_id, total in (("meta-llama/Llama-2-7b-hf", 6.74e9), ("mistralai/Mixtral-8x7B-v0.1", 46.7e9),
                            ("meta-llama/Meta-Llama-3-70B", 70.6e9)):
        assert costs.parameters(costs.shapes(model_id))[0] == pytest.approx(total, rel=0.01), model_id
    assert costs.parameters(costs.shapes("mistralai/Mixtral-8x7B-v0.1"))[1] == pytest.approx(12.9e9, rel=0.02)


def test_gpu_rule_beside_the_cpu_rates_for_the_bundled_models(shared_datasets):
    """The same FLOP rule at the CPU's measured throughput beside costs.py's measured rates
    (the quick plan of every paper on SmolLM2): the two estimates on one scale."""
    plan = prepare(["all"], ["smollm2-135m"], "quick", data_root=str(shared_datasets))
    ours, rates, by_suite = 0.0, 0.0, {}
    for c in plan.children:
        f, r = costs.cpu_check(c.suite, c.mode, c.model, c.settings, costs.cpu_flops())
        ours, rates = ours + f, rates + r
        pair = by_suite.setdefault(c.suite, [0.0, 0.0])
        pair[0], pair[1] = pair[0] + f, pair[1] + r
    print("FLOP rule / measured CPU rates:", f"{ours / rates:.2f};",
          ", ".join(f"{k} {a / b:.2f}" for k, (a, b) in sorted(by_suite.items())))
    assert 0.2 < ours / rates < 5  # the same order: the GPU hours are not off by a unit
    assert 0.5 < by_suite["mcqa"][0] / by_suite["mcqa"][1] < 2  # the suite the CPU reference measures


def test_every_suite_has_tokens_per_unit_and_contamination_counts_in_muis_units(shared_datasets):
    """A suite without its own tokens per unit once fell back to 100 tokens a unit: contamination, whose
    units are mui's (3 tokens), was estimated at 30 GPU hours per 7B model, ~30x its MUI runs. At the
    cpu scale (where contamination runs) the FLOP rule over the measured CPU rate is the same for
    contamination as for mui, the suite whose units it counts in."""
    from whitebox_eval.suites import SUITES

    assert SUITES["contamination"].tokens_per_unit == SUITES["mui"].tokens_per_unit
    plan = prepare(["001"], ["smollm2-135m"], "cpu", data_root=str(shared_datasets))
    ratio = {}
    for c in plan.children:
        if c.suite in ("mui", "contamination") and not c.skip and not c.label:  # trained columns: estimated on their base model
            f, r = costs.cpu_check(c.suite, c.mode, c.model, c.settings, costs.cpu_flops())
            ratio.setdefault(c.suite, []).append(f / r)
    assert 0.5 < max(ratio["contamination"]) / min(ratio["mui"]) < 2


def test_span_fine_tuning_is_counted_once_in_the_gpu_estimate():
    """span's record counts its fine-tuning in its units (3 forwards per example and epoch, and the
    fine-tuned model's evaluation); the GPU rule multiplies units by tokens and adds nothing of its
    own (it once added finetune_examples x 3 again: the training counted twice)."""
    from whitebox_eval.suites import suite

    span, s, flops = suite("span"), costs.shapes("meta-llama/Meta-Llama-3-8B"), 1e15
    base = {"task": "string_reversal", "limit": 100, "split": "id"}
    tuned = {**base, "finetune_examples": 1000}
    units0, units1 = span.estimate(None, base)[1], span.estimate(None, tuned)[1]
    cfg = span.config(None, tuned)
    assert units1 - units0 == 100 + 3 * 1000 * cfg.finetune.epochs  # one more evaluation, and the training once
    per_unit = span.tokens_per_unit * costs.flops_per_token(s) / flops
    assert costs.gpu_seconds(span, units1, s, flops) == pytest.approx(units1 * per_unit)
    assert costs.gpu_seconds(span, units1, s, flops) - costs.gpu_seconds(span, units0, s, flops) == pytest.approx(
        (100 + 3 * 1000 * cfg.finetune.epochs) * per_unit)


def test_gpu_check_results_set_the_throughput(tmp_path, monkeypatch):
    rows = [{"model": "llama-3-8b", "gpu": "NVIDIA H200", "0-shot_whitebox_tokens_per_s": 10000.0,
             "5-shot_whitebox_tokens_per_s": 30000.0, "study_tokens_per_s": 90000.0},
            {"model": "qwen2.5-7b", "study_tokens_per_s": 80000.0}]  # only the 0-shot white-box rate counts
    (tmp_path / "gpu_check.json").write_text(json.dumps(rows), encoding="utf-8")
    monkeypatch.setattr(costs, "GPU_CHECK", tmp_path / "gpu_check.json")
    costs.measured_throughput.cache_clear()
    try:
        flops, basis = costs.throughput()
        assert flops == pytest.approx(10000.0 * costs.flops_per_token(costs.shapes("meta-llama/Meta-Llama-3-8B")))
        assert basis.endswith("measured by benchmarks/gpu_check.py on NVIDIA H200")
        monkeypatch.setattr(costs, "GPU_CHECK", tmp_path / "absent.json")
        costs.measured_throughput.cache_clear()
        assert costs.throughput()[0] == pytest.approx(costs.GPU_PEAK_FLOPS * costs.GPU_EFFICIENCY)
    finally:
        costs.measured_throughput.cache_clear()


def test_a_local_config_json_sets_the_shapes(tiny):
    s = costs.shapes("any/model", str(tiny))
    cfg = json.loads((tiny / "config.json").read_text(encoding="utf-8"))
    assert (s["hidden"], s["layers"], s["vocab"]) == (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"])


def test_plan_only_every_paper_at_paper_scale_from_a_models_root(cli, models_root, shared_datasets):
    code, out, err = cli(["reproduce", "all", "--scale", "paper", "--plan-only", "--models-root", str(models_root),
                          "--data-root", str(shared_datasets)])
    assert code == 0, err
    for p in spec.papers().values():
        assert re.search(rf"^paper {p.number} {p.short}: \d+ runs, [\d,]+ items, ~[\d.,]+ GPU hours \([\d:]+\)", out, re.M)
        for m in p.models:
            if m.id:
                assert f"model {m.id} [{m.name}: {m.cite}" in out
                assert f"from {(models_root / m.id.replace('/', '--')).resolve()}" in out
    assert "not run (no hub id" in out  # 000's LLaMA-30B / -65B
    assert "--data triviaqa=PATH (hub: mandarjoshi/trivia_qa; given: " in out
    assert "TFLOP/s" in out and "warning" not in err
    plan = prepare(["all"], [], "paper", data_root=str(shared_datasets), models_root=str(models_root))
    assert all(c.source or c.skip for c in plan.children)
    assert prechecks.check(plan) == []
    span = [c for c in plan.children if c.suite == "span"]
    assert span and all(c.settings["finetune_examples"] == 2000 for c in span)
    assert any(c.settings.get("threshold_value") == 15 for c in plan.children)  # 001 Table 12 runs


def test_one_paper_end_to_end_with_a_hub_id_mapped_to_a_tiny_model(tiny, tmp_path, shared_datasets):
    from whitebox_eval import studies

    root = tmp_path / "models"
    shutil.copytree(tiny, root / "test-org--tiny-llama")
    r = studies.reproduce("004", tmp_path / "out", models=["004=test-org/tiny-llama"], scale="micro",
                          data_root=str(shared_datasets), models_root=str(root), show_progress=False)
    plan = json.loads((r.folder / "plan.json").read_text(encoding="utf-8"))
    assert plan["models"] == ["test-org/tiny-llama"]
    runs = r.content["papers"][0]["runs"]
    trained = "test-org/tiny-llama + arithmetic"  # 004's trained column: the same model fine-tuned first
    assert runs and all(x["status"] == "done" and x["model"] in ("test-org/tiny-llama", trained) for x in runs)
    assert r.content["papers"][0]["models"] == ["test-org/tiny-llama", trained]


def test_overview_when_each_paper_has_its_own_models():
    from whitebox_eval.reproduce import render

    def claim(cid, model):
        return {"id": cid, "model": model, "claim": "c", "cite": "sec. 1", "verdict": "not run", "reason": "r"}

    content = {"models": ["a/x", "b/y", "c/z"], "papers": [
        {"number": "002", "models": ["a/x", "b/y"], "claims": [claim("k", "a/x"), claim("k", "b/y")]},
        {"number": "003", "models": ["c/z"], "claims": [claim("j", "c/z")]}]}
    block = render.overview(content)
    assert block.header == ["paper", "claim (cite)", "verdict per model"]
    assert block.rows[0][2] == "x: not run (r); y: not run (r)" and block.rows[1][2] == "z: not run (r)"
    content["papers"] = [{**content["papers"][0], "models": content["models"]}]
    assert render.overview(content).header == ["paper", "claim (cite)", "a/x", "b/y", "c/z"]


def test_plan_only_prints_the_plan_and_notes_what_would_stop_the_run(cli, tmp_path):
    f = tmp_path / "triviaqa"
    f.mkdir()
    (f / "t.jsonl").write_text("{}\n")
    code, out, err = cli(["reproduce", "004", "--plan-only", "--model", str(tmp_path / "no_such_model"),
                          "--data-root", str(tmp_path)])
    assert code == 0 and "formats" in out
    assert "note: the run would stop here: none of the plan's" in err and "model path not found" in err
