"""Paper 001's released SAEs (Table 4) at --scale paper: the plan lists them, the SAE children run on
their base models with a saelens: spec per layer (no SAE trained), and a local copy under
--models-root is found the way models are."""

from __future__ import annotations

from whitebox_eval.models import load_options as lo
from whitebox_eval.reproduce import plan as plan_mod
from whitebox_eval.reproduce.data import BENCHMARKS
from whitebox_eval.reproduce.spec import resolve


def test_paper_scale_plan_names_the_papers_saes(tmp_path):
    paper = resolve(["001"])[0]
    assert {s.model for s in paper.saes} == {"Llama-3.1-8B", "Gemma2-9B"}
    data = {name: f"/data/{name}" for name in BENCHMARKS}
    p = plan_mod.build([paper], [], "paper", data)
    sae_children = [c for c in p.children if c.settings.get("score") == "sae"]
    assert {c.model for c in sae_children} == {"meta-llama/Llama-3.1-8B", "google/gemma-2-9b"}
    llama = next(c for c in sae_children if c.model == "meta-llama/Llama-3.1-8B")
    assert llama.settings["sae"][0] == "saelens:llama_scope_lxr_32x/l0r_32x" and len(llama.settings["sae"]) == 32
    assert "train_sae" not in llama.settings
    # the SAE models run nowhere else; the other experiments keep the paper's chat models
    assert all(c.model not in ("meta-llama/Llama-3.1-8B", "google/gemma-2-9b") for c in p.children
               if c.settings.get("score") != "sae")
    lines = [line for line in p.lines() if line.startswith("SAEs of paper 001")]
    assert len(lines) == 2 and "saelens:gemma-scope-9b-pt-res-canonical/layer_0/width_131k/canonical .. layer_41" in lines[1]
    assert "no local copy" in lines[0]
    (tmp_path / "fnlp--Llama3_1-8B-Base-LXR-32x").mkdir()
    lo.set_load(models_root=str(tmp_path))
    try:
        assert f"local copy {(tmp_path / 'fnlp--Llama3_1-8B-Base-LXR-32x').resolve()}" in \
            [line for line in p.lines() if "Llama-3.1-8B" in line and line.startswith("SAEs")][0]
    finally:
        lo.reset()
    # other scales read the SAE their own child trained (sae-wikitext2, one per model)
    cpu = plan_mod.build([paper], [], "cpu", data)
    trained = {c.model: plan_mod.run_ref(c.run_id) for c in cpu.children if c.suite == "sae"}
    scored = [c for c in cpu.children if c.settings.get("score") == "sae"]
    assert scored and all(c.settings["sae"] == [trained[c.model]] for c in scored)
