"""Loading: safe defaults and clear errors for every mistake a user can make."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import transformers as tf

sys.path.insert(0, str(Path(__file__).parents[1]))
from tiny_models import tiny_model  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.internals import Capture, Engine, batch_from_ids  # noqa: E402
from whitebox_eval.models import FAMILIES, load_model, supported_model_types  # noqa: E402
from whitebox_eval.models.architectures import Architecture  # noqa: E402


def _save_tiny(folder: Path, family: str = "llama", safe: bool = True) -> Path:
    model = tiny_model(family)
    if safe:
        model.save_pretrained(folder)
    else:  # a pickle checkpoint, as older hub repos ship
        folder.mkdir(parents=True)
        model.config.save_pretrained(folder)
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
    return folder


def test_every_family_has_a_description():
    assert set(FAMILIES) >= {"llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "olmo2", "phi3", "gpt2"}


def test_nonexistent_path_says_so(tmp_path):
    with pytest.raises(WhiteboxError, match="not found"):
        load_model(str(tmp_path / "missing-model"))
    with pytest.raises(WhiteboxError, match="GGUF file not found"):
        load_model(str(tmp_path / "x.gguf"))


def test_directory_without_weights(tmp_path):
    (tmp_path / "config.json").write_text(tiny_model("llama").config.to_json_string())
    with pytest.raises(WhiteboxError, match="no weights found"):
        load_model(str(tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(WhiteboxError, match="no config.json"):
        load_model(str(empty))


def test_pickle_checkpoint_needs_opt_in(tmp_path):
    folder = _save_tiny(tmp_path / "pkl", safe=False)
    assert any(p.suffix == ".bin" for p in folder.iterdir())
    with pytest.raises(WhiteboxError, match="allow_pickle"):
        load_model(str(folder))


def test_unsupported_architecture_lists_the_supported_ones(tmp_path):
    cfg = tf.BloomConfig(vocab_size=64, hidden_size=32, n_layer=2, n_head=4)
    model = tf.BloomForCausalLM(cfg)
    with pytest.raises(WhiteboxError) as err:
        Architecture.of(model)
    assert "bloom" in str(err.value) and "llama" in str(err.value) and "gpt_neox" in str(err.value)
    assert set(supported_model_types()) >= {"llama", "gemma3_text", "gpt2", "phi3", "gpt_neox"}


def test_hub_id_offline_names_the_offline_alternatives(monkeypatch):
    from whitebox_eval.models import loading

    monkeypatch.setattr(loading, "hub_unreachable_reason", lambda: "no network here")
    with pytest.raises(WhiteboxError, match="smollm2-135m"):
        load_model("someorg/some-model")


def test_local_safetensors_folder_loads_and_runs(tmp_path):
    folder = _save_tiny(tmp_path / "st", family="qwen3")
    _tiny_tokenizer(folder)  # a tokenizer is required by load_model: build a tiny one offline
    lm = load_model(str(folder))
    assert lm.arch.family.name == "qwen3"
    assert lm.name == str(folder)  # the spec it was loaded from
    engine = Engine(lm)
    batch = engine.batch(["t5 t9 t17", "t3 t4"])
    assert batch.input_ids.tolist()[1][0] == lm.tokenizer.pad_token_id  # left padded
    t = engine.run(batch, [Capture("q")])
    assert t["q"].shape == (2, lm.arch.n_layers, 1, lm.arch.n_heads, lm.arch.head_dim)


def test_cli_placement_reaches_load_model(tmp_path, monkeypatch):
    """``whitebox-eval --device-map auto ...`` sets the default every study's load uses."""
    from whitebox_eval.models import placement

    folder = _save_tiny(tmp_path / "st")
    _tiny_tokenizer(folder)
    monkeypatch.setattr(placement, "PLACEMENT", placement.Placement())
    seen = []
    original = tf.AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(tf.AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: seen.append(k.get("device_map")) or original(*a, **k))
    plain = load_model(str(folder))
    where = "cuda:0" if torch.cuda.is_available() else "cpu"
    assert plain.device == torch.device(where)  # auto
    placement.set_placement("cpu", "auto")
    split = load_model(str(folder))
    # without a map the model is loaded straight onto the device; with one accelerate placed the modules
    assert seen == [{"": where}, "auto"]
    assert split.device == torch.device("cpu")
    batch = Engine(split).batch(["t5 t9 t17"])
    torch.testing.assert_close(Engine(split).run(batch).logits, Engine(plain).run(batch.to(plain.device)).logits.to("cpu"))
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert placement.rank_device("cuda") == "cuda:1"  # torchrun: each rank its own GPU
    assert placement.rank_device("cuda:0") == "cuda:0"  # an explicit GPU stays
    assert placement.resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(WhiteboxError, match="unknown device 'gpu0'"):
        placement.set_placement("gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(WhiteboxError, match="sees no CUDA GPU"):
            placement.set_placement("cuda")


def _tiny_tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {f"t{i}": i for i in range(64)}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tf.PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="t0", eos_token="t2").save_pretrained(folder)


def test_out_of_range_requests_raise_the_project_error():
    model = tiny_model("llama")
    from whitebox_eval.models.loading import LoadedModel

    lm = LoadedModel(model, None, Architecture.of(model), "tiny", "random")
    engine = Engine(lm)
    batch = batch_from_ids([[3, 4, 5], [6, 7]])
    with pytest.raises(WhiteboxError, match="layer 7 is out of range"):
        engine.run(batch, [Capture("q", layers=[7])])
    with pytest.raises(WhiteboxError, match="position 2 is out of range for example 1"):
        engine.run(batch, [Capture("q", positions=[[2], [2]])])
    with pytest.raises(WhiteboxError, match="head 9 is out of range"):
        from whitebox_eval.internals import ScaleHeads

        engine.run(batch, edits=[ScaleHeads(0, [9])])
    with pytest.raises(WhiteboxError, match="unknown capture point"):
        engine.run(batch, [Capture("queries")])
    with pytest.raises(WhiteboxError, match="same number of positions"):
        engine.run(batch, [Capture("q", positions=[[0, 1], [1]])])
    with pytest.raises(WhiteboxError, match="neuron index out of range"):
        from whitebox_eval.internals import MaskNeurons

        engine.run(batch, edits=[MaskNeurons(0, [10_000])])
    assert torch.isfinite(engine.run(batch).logits).all()  # the engine is still usable after errors


def test_a_bare_cuda_device_resolves_to_the_current_gpus_index(monkeypatch):
    """``--device cuda`` outside torchrun is the current GPU, with its index: ``torch.cuda.set_device``
    (which load_model calls) refuses ``torch.device("cuda")`` (found on an H200)."""
    from whitebox_eval.models import placement

    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 2)
    assert placement.resolve_device("cuda") == torch.device("cuda", 2)
    assert placement.resolve_device("auto") == torch.device("cuda", 2)
    assert placement.resolve_device("cuda:1") == torch.device("cuda", 1)  # an explicit index stays
    from torch.cuda._utils import _get_device_index

    assert _get_device_index(placement.resolve_device("cuda")) == 2  # what set_device reads
    with pytest.raises(ValueError):
        _get_device_index(torch.device("cuda"))  # the bare device it refused


def test_a_gpu_load_goes_straight_to_its_device_and_makes_it_current(tmp_path, monkeypatch):
    """Simulated GPU: the weights are loaded onto cuda:1 (no whole copy in host memory first) and
    cuda:1 becomes the current device (a torchrun rank's kernels and caches go there)."""
    from whitebox_eval.models import loading

    folder = _save_tiny(tmp_path / "st")
    _tiny_tokenizer(folder)
    seen = []
    monkeypatch.setattr(loading, "resolve_device", lambda device: torch.device("cuda", 1))
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: seen.append(("current", torch.device(d))))

    def from_pretrained(*a, **k):
        seen.append(("device_map", k.get("device_map")))
        raise RuntimeError("stop here: no GPU to load onto")

    monkeypatch.setattr(tf.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    with pytest.raises(RuntimeError, match="stop here"):
        load_model(str(folder), dtype="float32", device="cuda")
    assert seen == [("current", torch.device("cuda", 1)), ("device_map", {"": "cuda:1"})]
