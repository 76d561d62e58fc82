"""``--config RUN/config.yaml`` re-runs what it wrote: one finished run of
every study command on the plain route, and mcqa on every load route it owns (``--adapter``,
``@REVISION``, ``--models-root``), re-run from its config.yaml alone, samples byte for byte."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))


GAR_TASK = "GendersOfPersons/same,KindsOfThings/kindOf×2"
#: every study command, with the options of a small run on a tiny random model
RUNS = {
    "mcqa": ["mcqa", "--limit", "8", "--min-val-items", "2", "--methods", "baseline,qk,lens", "--no-item-views",
             "--seed", "3", "--no-uncertainty"],
    "formats": ["formats", "--limit", "2", "--n-samples", "2", "--max-new-tokens", "3", "--n-bins", "2", "--shots", "1"],
    "gar": ["gar", "--limit", "2", "--tasks", GAR_TASK, "--no-kr", "--rule", "mean"],
    "span": ["span", "--limit", "2", "--split", "both", "--id-params", "length=1-3", "--ood-params", "length=4-5",
             "--no-rollout", "--heads", "1,2"],
    "mui": ["mui", "--task", "ssd", "--limit", "2", "--max-new-tokens", "3", "--unit", "neuron"],
    "masking": ["mui", "masking", "--source-task", "ssd", "--limit", "2", "--ks", "1,2", "--random-draws", "1",
                "--no-generate", "--max-new-tokens", "3"],
}


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """A tiny random llama with SmolLM2's tokenizer (GAR needs word-initial tokens), saved as a folder."""
    import torch
    import transformers as tf

    from whitebox_eval.models import load_model

    tokenizer = load_model("smollm2-135m").tokenizer
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=2048,
                         pad_token_id=0, eos_token_id=tokenizer.eos_token_id)
    lm = tf.AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():
        for p in lm.parameters():
            p.normal_(0, 0.3)
    path = tmp_path_factory.mktemp("models") / "tiny"
    lm.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _run_and_rerun(cli, argv: list[str], out: Path, *extra: str) -> tuple[Path, Path]:
    code, _, err = cli([*argv, *extra, "--output", str(out), "--run-id", "first"])
    assert code == 0, err
    first = out / "first"
    command = argv[:2] if argv[:2] == ["mui", "masking"] else argv[:1]
    code, _, err = cli([*command, "--config", str(first / "config.yaml"), "--output", str(out), "--run-id", "again"])
    assert code == 0, err
    return first, out / "again"


def _same_run(first: Path, again: Path) -> None:
    assert (first / "samples.jsonl").read_bytes() == (again / "samples.jsonl").read_bytes()
    a, b = (yaml.safe_load((f / "config.yaml").read_text()) for f in (first, again))
    for key in ("run_id", "created"):
        a.pop(key, None), b.pop(key, None)
    assert a == b


@pytest.mark.parametrize("name", list(RUNS))
def test_every_command_reruns_from_its_config(name, model, tmp_path, cli):
    first, again = _run_and_rerun(cli, RUNS[name], tmp_path / "runs", "--model", str(model))
    _same_run(first, again)


def test_a_setting_without_an_option_travels_through_the_config(model, tmp_path, cli):
    """span's append_eos has no option: a user file sets it, config.yaml records it, a re-run keeps it."""
    opts = tmp_path / "opts.yaml"
    opts.write_text("append_eos: false\nheatmaps: 0\n")
    first, again = _run_and_rerun(cli, RUNS["span"], tmp_path / "runs", "--model", str(model), "--config", str(opts))
    assert yaml.safe_load((first / "config.yaml").read_text())["append_eos"] is False
    _same_run(first, again)


def test_mcqa_through_an_adapter(model, tmp_path, cli):
    from tiny_models import random_lora

    lora = random_lora(model, tmp_path / "lora")
    first, again = _run_and_rerun(cli, RUNS["mcqa"], tmp_path / "runs", "--model", str(model), "--adapter", str(lora))
    assert yaml.safe_load((again / "config.yaml").read_text())["model_load"]["adapter"]["mode"] == "merge"
    _same_run(first, again)
    (lora / "adapter_model.safetensors").write_bytes((lora / "adapter_model.safetensors").read_bytes()[:-8] + b"\0" * 8)
    code, _, err = cli(["mcqa", "--config", str(first / "config.yaml"), "--output", str(tmp_path / "runs"),
                        "--run-id", "changed"])
    assert code == 2 and "changed since the run" in err and not (tmp_path / "runs" / "changed").exists()


def test_mcqa_at_a_revision_from_the_hub_cache(model, tmp_path, cli, monkeypatch):
    from huggingface_hub import constants

    commit = "89abcdef0123456789abcdef0123456789abcdef"
    repo = tmp_path / "hub" / "models--Org--tiny"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "step10").write_text(commit)
    shutil.copytree(model, repo / "snapshots" / commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    first, again = _run_and_rerun(cli, RUNS["mcqa"], tmp_path / "runs", "--model", "Org/tiny@step10")
    assert yaml.safe_load((again / "config.yaml").read_text())["model_load"]["model_commit"] == commit
    _same_run(first, again)


def test_mcqa_from_a_models_root_records_no_absolute_path(model, tmp_path, cli, monkeypatch):
    shutil.copytree(model, tmp_path / "copies" / "Org--tiny@v1")
    monkeypatch.chdir(tmp_path)
    first, again = _run_and_rerun(cli, RUNS["mcqa"], Path("runs"), "--model", "Org/tiny@v1", "--models-root", "copies")
    recorded = yaml.safe_load((first / "config.yaml").read_text())["model_load"]["models_root"]
    assert recorded == {"found_under": "Org--tiny@v1", "folder": "copies"}
    assert str(tmp_path) not in (first / "config.yaml").read_text()
    _same_run(first, again)
    os.rename(tmp_path / "copies", tmp_path / "moved")  # where the copy was found is not compared on --resume
    code, _, err = cli([*RUNS["mcqa"], "--model", "Org/tiny@v1", "--models-root", "moved", "--output", "runs",
                        "--run-id", "first", "--resume"])
    assert code == 0, err


def test_a_suite_without_a_command_reruns_through_studies(tmp_path):
    """The SAE study has no command: studies.sae(**run_settings(config.yaml)) trains the same SAE."""
    from tiny_models import tiny_folder

    from whitebox_eval import studies
    from whitebox_eval.config_file import run_settings
    from whitebox_eval.sae.record import SUITE
    from whitebox_eval.sae.study import SAE_DIR

    text = tmp_path / "text.txt"
    text.write_text("\n\n".join(f"What is {i} + {i + 1}? {2 * i + 1}. The cat sat on mat {i}." for i in range(60)))
    model = tiny_folder("llama", tmp_path / "tiny")
    first = studies.sae(tmp_path / "runs", run_id="first", show_progress=False, model=str(model), layer=1,
                        text=[str(text)], context=16, heldout=0.2, eval_tokens=64, d_sae=16, k=4, steps=10,
                        batch_size=32, dead_window=64)
    mode, settings = run_settings(first.folder / "config.yaml", SUITE)
    assert mode is None and settings["steps"] == 10 and settings["text"] == (str(text),)
    again = studies.sae(tmp_path / "runs", run_id="again", show_progress=False, **settings)
    weights = sorted((first.folder / SAE_DIR).glob("*.safetensors"))
    assert weights and all(w.read_bytes() == (again.folder / SAE_DIR / w.name).read_bytes() for w in weights)


def test_mui_on_sae_features_reruns_from_its_config(model, tmp_path, cli):
    """A feature-MUI run (an SAE study's run folder as --sae): its sae_sources record is no option."""
    from whitebox_eval import studies

    text = tmp_path / "text.txt"
    text.write_text("\n\n".join(f"What is {i} + {i + 1}? {2 * i + 1}. The cat sat on mat {i}." for i in range(60)))
    sae = studies.sae(tmp_path / "saes", run_id="sae", show_progress=False, model=str(model), layer=1,
                      text=[str(text)], context=16, heldout=0.2, eval_tokens=64, d_sae=16, k=4, steps=5,
                      batch_size=32, dead_window=64)
    first, again = _run_and_rerun(cli, [*RUNS["mui"], "--score", "sae", "--sae", str(sae.folder)], tmp_path / "runs",
                                  "--model", str(model))
    assert "sae_sources" in yaml.safe_load((first / "config.yaml").read_text())
    _same_run(first, again)
