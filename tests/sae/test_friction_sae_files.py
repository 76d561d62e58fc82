"""An SAE config of the wrong shape, weights that are
not finite, and ``hf:`` paths leading out of their snapshot are each one WhiteboxError line
naming the file (exit 2 from the command line, before the model loads)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.sae.files import load_sae, save_sae
from whitebox_eval.sae.encoding import SAE
from whitebox_eval.sae.sources import resolve_sae

COMMIT = "0123456789abcdef0123456789abcdef01234567"
GOOD_CFG = {"architecture": "standard", "d_in": 4, "d_sae": 6, "apply_b_dec_to_input": True}


def _weights(**over) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    w = {"W_enc": torch.randn(4, 6, generator=g), "b_enc": torch.zeros(6), "W_dec": torch.randn(6, 4, generator=g),
         "b_dec": torch.zeros(4)}
    return {**w, **over}


def _folder(tmp_path: Path, cfg, name="sae", **over) -> Path:
    folder = tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    save_file(_weights(**over), str(folder / "sae_weights.safetensors"))
    (folder / "cfg.json").write_text(cfg if isinstance(cfg, str) else json.dumps(cfg))
    return folder


@pytest.mark.parametrize("cfg, says", [
    ([1, 2, 3], "holds a list, not a JSON object"),
    ('"standard"', "holds a string, not a JSON object"),
    ("12", "holds a number, not a JSON object"),
    ({**GOOD_CFG, "d_in": "4"}, "d_in must be a whole number >= 0, not a string"),
    ({**GOOD_CFG, "d_sae": 6.5}, "d_sae must be a whole number"),
    ({**GOOD_CFG, "architecture": ["topk"]}, "architecture must be a string, not a list"),
    ({**GOOD_CFG, "apply_b_dec_to_input": "yes"}, "apply_b_dec_to_input must be true or false"),
    ({**GOOD_CFG, "activation_fn_kwargs": [3]}, "activation_fn_kwargs must be an object"),
    ({**GOOD_CFG, "architecture": "topk", "activation_fn_kwargs": {"k": "2"}}, "activation_fn_kwargs.k must be"),
    ({**GOOD_CFG, "normalize_activations": "expected_average_only_in", "norm_scaling_factor": "NaN"},
     "norm_scaling_factor must be a finite number"),
    ('{"d_in": 4, "d_sae": 6, "norm_scaling_factor": Infinity, "normalize_activations": "expected_average_only_in"}',
     "norm_scaling_factor must be a finite number"),
    ({**GOOD_CFG, "normalize_activations": "expected_average_only_in",
      "dataset_average_activation_norm": {"in": 0}}, "dataset_average_activation_norm.in must be a finite number > 0"),
])
def test_a_config_of_the_wrong_shape_is_one_line(tmp_path, cfg, says):
    folder = _folder(tmp_path, cfg)
    with pytest.raises(WhiteboxError, match="cfg.json") as info:
        load_sae(folder)
    assert says in str(info.value) and "\n" not in str(info.value)


def test_a_llama_scope_hyperparams_of_the_wrong_shape_is_one_line(tmp_path):
    folder = tmp_path / "ls"
    (folder / "checkpoints").mkdir(parents=True)
    save_file(_weights(), str(folder / "checkpoints" / "final.safetensors"))
    (folder / "hyperparams.json").write_text(json.dumps([{"act_fn": "relu"}]))
    with pytest.raises(WhiteboxError, match="hyperparams.json holds a list"):
        load_sae(folder)
    (folder / "hyperparams.json").write_text(json.dumps({"act_fn": "jumprelu", "d_model": 4, "d_sae": 6}))
    with pytest.raises(WhiteboxError, match="without jump_relu_threshold"):
        load_sae(folder)
    (folder / "hyperparams.json").write_text(json.dumps({"act_fn": "topk", "d_model": 4, "d_sae": 6, "top_k": [2]}))
    with pytest.raises(WhiteboxError, match="k must be a whole number"):
        load_sae(folder)


def test_a_gemma_scope_2_config_json_that_is_a_list_is_one_line(tmp_path):
    folder = tmp_path / "gs2"
    folder.mkdir()
    save_file(_weights(threshold=torch.ones(6)), str(folder / "params.safetensors"))
    (folder / "config.json").write_text("[]")
    with pytest.raises(WhiteboxError, match="config.json holds a list"):
        resolve_sae(str(folder))


@pytest.mark.parametrize("tensor, value, count", [("W_enc", float("nan"), "1 NaN"), ("b_dec", float("inf"), "1 infinite"),
                                                  ("W_dec", float("-inf"), "1 infinite")])
def test_weights_that_are_not_finite_are_named_as_the_files_fault(tmp_path, tensor, value, count):
    bad = _weights()[tensor].clone()
    bad.view(-1)[0] = value
    folder = _folder(tmp_path, GOOD_CFG, **{tensor: bad})
    with pytest.raises(WhiteboxError) as info:
        load_sae(folder)
    text = str(info.value)
    assert f"SAE weight {tensor}" in text and count in text and "not the activations" in text
    assert "fp16" not in text and "sae_weights.safetensors" in text


def test_a_threshold_that_overflows_from_log_threshold_is_refused(tmp_path):
    folder = _folder(tmp_path, {"architecture": "jumprelu", "d_in": 4, "d_sae": 6},
                     log_threshold=torch.tensor([0.0, 0, 0, 0, 0, 1000.0]))  # exp(1000) = inf in float32
    with pytest.raises(WhiteboxError, match=r"SAE weight threshold \(6,\) holds 1 infinite"):
        load_sae(folder)


def test_a_good_sae_still_loads_and_round_trips(tmp_path):
    sae = SAE(*(_weights()[k] for k in ("W_enc", "b_enc", "W_dec", "b_dec")))
    again = load_sae(save_sae(sae, tmp_path / "ok"))
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(again.encode(x), sae.encode(x))


@pytest.fixture
def snapshot(tmp_path, monkeypatch):
    """An offline hub cache holding org/saes at COMMIT (files linked into blobs/ as the cache does),
    a folder outside it, and a link from inside the snapshot to that folder."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    repo = cache / "models--org--saes"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snap = repo / "snapshots" / COMMIT
    good = _folder(tmp_path, GOOD_CFG, name="made")
    (repo / "blobs").mkdir()
    for name in ("cfg.json", "sae_weights.safetensors"):
        blob = repo / "blobs" / f"blob-{name}"
        blob.write_bytes((good / name).read_bytes())
        (snap / "layer_1").mkdir(parents=True, exist_ok=True)
        (snap / "layer_1" / name).symlink_to(os.path.relpath(blob, snap / "layer_1"))
    elsewhere = _folder(tmp_path, GOOD_CFG, name="elsewhere")
    (snap / "escape").symlink_to(elsewhere, target_is_directory=True)
    (snap / "layer_2").mkdir()
    (snap / "layer_2" / "cfg.json").write_text(json.dumps(GOOD_CFG))
    (snap / "layer_2" / "sae_weights.safetensors").symlink_to(elsewhere / "sae_weights.safetensors")
    return snap


def test_hub_paths_stay_inside_their_snapshot(snapshot):
    ok = resolve_sae("hf:org/saes/layer_1")  # files linked into the repository's blobs/ are its own
    assert ok.path == snapshot / "layer_1" and ok.revision == COMMIT and ok.repo_id == "org/saes"
    assert load_sae(ok.path).d_sae == 6
    for source, says in [("hf:org/saes/../../..", "PATH must be a path inside the repository"),
                         ("hf:org/saes/layer_1/../../x", "PATH must be a path inside"),
                         ("hf:org/saes/./layer_1", "PATH must be a path inside"),
                         ("hf:org/saes//etc", "PATH must be a path inside"),
                         ("hf:../saes/layer_1", "give hf:ORG/REPO/PATH"),
                         ("hf:org/../layer_1", "give hf:ORG/REPO/PATH"),
                         ("hf:org/saes/layer_1@../../main", "is not a branch, tag or commit"),
                         ("hf:org/saes/escape", "escape leads outside the repository's files"),
                         ("hf:org/saes/layer_2", "layer_2/sae_weights.safetensors leads outside")]:
        with pytest.raises(WhiteboxError, match=says):
            resolve_sae(source)


def test_a_bad_sae_source_is_refused_before_the_study_is_imported(tmp_path):
    """Exit 2, one line, and the study not imported (its imports made it take ~9 s)."""
    folder = _folder(tmp_path, "[1]", name="listcfg")
    code = ("import sys\nfrom whitebox_eval.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    print('exit', e.code, 'mui.study' in sys.modules, file=sys.stderr)\n")
    for source in ("hf:org/repo/../../..", str(tmp_path / "nowhere")):
        got = subprocess.run([sys.executable, "-c", code, "mui", "--task", "ssd", "--score", "sae", "--sae", source,
                              "--output", str(tmp_path / "runs")], capture_output=True, text=True,
                             env={**os.environ, "HF_HUB_OFFLINE": "1"})
        lines = got.stderr.strip().splitlines()
        assert lines[-1] == "exit 2 False", got.stderr
        assert lines[0].startswith("error: ") and len(lines) == 2, got.stderr
        assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    # a config of the wrong shape: one line naming the file, before the model or a run folder
    got = subprocess.run([sys.executable, "-c", code, "mui", "--task", "ssd", "--score", "sae", "--sae", f"3={folder}", "--output",
                          str(tmp_path / "runs")], capture_output=True, text=True)
    lines = got.stderr.strip().splitlines()
    assert lines[-1] == "exit 2 False", got.stderr
    assert lines[0] == f"error: {folder / 'cfg.json'} holds a list, not a JSON object of SAE settings " \
                       "(SAELens' cfg.json: d_in, d_sae, architecture ...)"
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
