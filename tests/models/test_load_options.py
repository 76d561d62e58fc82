"""Models as researchers have them: a LoRA adapter (--adapter) against peft's own merged model,
ORG/NAME@REVISION from a --models-root copy and from a hub-cache snapshot, --model-arg checked and
recorded, and every command that loads a model taking the loading options."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import click
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1]))
from tiny_models import random_lora, tiny_folder  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.internals import Engine  # noqa: E402
from whitebox_eval.models import load_options as lo  # noqa: E402
from whitebox_eval.models.load_check import configure  # noqa: E402
from whitebox_eval.models.loading import load_model, resolve_source  # noqa: E402

PROMPTS = ["Question: which is red? A. red B. no Answer:", "the sum of two"]
LOADING_OPTIONS = {"allow_pickle", "trust_remote_code", "device", "device_map", "model_args", "adapter", "adapter_mode"}


@pytest.fixture(autouse=True)
def plain_load():
    lo.reset()
    yield
    lo.reset()


def _adapter(base: Path, out: Path, seed: int = 1) -> Path:
    """A LoRA adapter on q/v/down projections with random (non-zero) A and B, saved by peft."""
    return random_lora(base, out, targets=("q_proj", "v_proj", "down_proj"), r=4, seed=seed)


def _peft_logits(base: Path, adapter: Path, batch, merged: bool) -> torch.Tensor:
    """peft's own model (merged, or with its LoRA layers), last-position logits as the engine takes
    them (``logits_to_keep=1``: the same product)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), str(adapter))
    model = (model.merge_and_unload() if merged else model).eval()
    with torch.no_grad():
        return model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids,
                     logits_to_keep=1).logits[:, -1]


def test_adapter_gives_peft_logits(tmp_path):
    """--adapter equals peft's merged model (and --adapter-mode keep peft's unmerged one) within 1e-7
    (measured: 0.0, bit-identical; logits up to 5.3 in size); merged vs unmerged differ by float32
    rounding only (1.9e-6 measured)."""
    base = tiny_folder("llama", tmp_path / "base")
    adapter = _adapter(base, tmp_path / "lora")
    plain = load_model(str(base), dtype="float32", device="cpu")
    batch = Engine(plain).batch(PROMPTS)
    for mode in ("merge", "keep"):
        ref = _peft_logits(base, adapter, batch, merged=mode == "merge")
        lm = load_model(str(base), dtype="float32", device="cpu", options=lo.LoadOptions(adapter=str(adapter), adapter_mode=mode))
        got = Engine(lm).run(batch).logits
        assert (got - ref).abs().max() <= 1e-7, (mode, float((got - ref).abs().max()))
    assert (Engine(plain).run(batch).logits - ref).abs().max() > 1e-2  # the adapter changes the model


def test_adapter_for_another_model_is_refused_before_loading(tmp_path):
    base = tiny_folder("llama", tmp_path / "base")
    other = tmp_path / "other"
    tiny_folder("llama", other)
    cfg = json.loads((other / "config.json").read_text())
    cfg.update(hidden_size=56, head_dim=14)
    (other / "config.json").write_text(json.dumps(cfg))
    from transformers import AutoConfig, AutoModelForCausalLM

    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(other)).save_pretrained(other)
    adapter = _adapter(other, tmp_path / "lora56")
    with pytest.raises(WhiteboxError, match="56 wide, which no projection of the model is"):
        configure(str(base), adapter=str(adapter))
    with pytest.raises(WhiteboxError, match="no adapter_config.json"):
        configure(str(base), adapter=str(tmp_path))


def test_revision_from_models_root_and_from_a_hub_cache_snapshot(tmp_path, monkeypatch):
    from huggingface_hub import constants

    base = tiny_folder("llama", tmp_path / "base")
    root = tmp_path / "root"
    shutil.copytree(base, root / "EleutherAI--tiny@step1000")
    source, _ = resolve_source("EleutherAI/tiny@step1000", models_root=str(root))
    assert source == str((root / "EleutherAI--tiny@step1000").resolve())
    # huggingface_hub's cache layout: refs/<branch> holds the commit, snapshots/<commit>/ the files
    cache = tmp_path / "hub"
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / "models--EleutherAI--pythia-tiny"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "step143000").write_text(commit)
    shutil.copytree(base, repo / "snapshots" / commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    source, extra = resolve_source("EleutherAI/pythia-tiny@step143000")
    assert Path(source) == repo / "snapshots" / commit and extra == {"use_safetensors": True}
    lm = load_model("EleutherAI/pythia-tiny@step143000", dtype="float32", device="cpu")
    assert lm.arch.family.name == "llama" and lm.source == source
    configure("EleutherAI/pythia-tiny@step143000")  # what a command does first: config.yaml records the commit
    assert lo.record()["model_load"]["model_commit"] == commit
    with pytest.raises(WhiteboxError, match="revision step1 is not in the Hugging Face cache.*--models-root"):
        resolve_source("EleutherAI/pythia-tiny@step1")


def test_model_args_are_checked_and_recorded(tmp_path):
    with pytest.raises(WhiteboxError, match="not one of the keys"):
        lo.parse_model_args(["device_map=auto"])
    with pytest.raises(WhiteboxError, match="must be true or false"):
        lo.parse_model_args(["load_in_4bit=maybe"])
    with pytest.raises(WhiteboxError, match="exclude each other"):
        lo.parse_model_args(["load_in_4bit=true", "load_in_8bit=1"])
    with pytest.raises(WhiteboxError, match="CUDA GPU only"):
        configure(None, model_args=["load_in_4bit=true"], device="cpu")
    base = tiny_folder("llama", tmp_path / "base")
    adapter = _adapter(base, tmp_path / "lora")
    configure(str(base), model_args=["attn_implementation=eager"], adapter=str(adapter))
    from whitebox_eval.runs import open_run

    folder = open_run(tmp_path / "runs", {"suite": "x", "model": str(base)}, run_id="r")
    import yaml

    recorded = yaml.safe_load((folder.path / "config.yaml").read_text())["model_load"]
    assert recorded["model_args"] == {"attn_implementation": "eager"}
    assert recorded["adapter"]["mode"] == "merge" and len(recorded["adapter"]["sha256"]) == 64
    assert load_model(str(base), device="cpu").model.config._attn_implementation.endswith("eager")


def _commands():
    from whitebox_eval.cli import cli

    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        yield name, cmd
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(ctx):
                yield f"{name} {sub}", cmd.get_command(ctx, sub)


def test_every_command_that_loads_a_model_takes_the_loading_options():
    """A command with --model (or --before/--after) has every loading option, --device after the sub-command too."""
    walked = 0
    for name, cmd in _commands():
        params = {p.name for p in cmd.params}
        if not params & {"model", "models", "before"}:
            continue
        walked += 1
        assert LOADING_OPTIONS <= params, (name, sorted(LOADING_OPTIONS - params))
        assert "models_root" in params, name
    assert walked >= 11  # mcqa formats mui (+masking compare train-sae sae-fidelity) gar span reproduce inspect


def test_cli_bad_loading_input_is_one_line_before_any_model_work(tmp_path, capsys):
    from whitebox_eval.cli import main

    for argv, fix in [(["mcqa", "--model-arg", "load_in_4bit=true", "--device", "cpu"], "CUDA GPU only"),
                      (["mcqa", "--model-arg", "nope=1"], "not one of the keys"),
                      (["gar", "--adapter", str(tmp_path / "missing")], "no such folder"),
                      (["mcqa", "--model", "org/absent@step1", "--models-root", str(tmp_path)], "not in the Hugging Face cache")]:
        with pytest.raises(SystemExit) as e:
            main([*argv, "--output", str(tmp_path / "runs")])
        err = capsys.readouterr().err
        assert e.value.code == 2 and fix in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
