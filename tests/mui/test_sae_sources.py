"""SAEs by every route, offline: a SAELens folder, Gemma Scope 1's params.npz, Gemma Scope 2's
params.safetensors + config.json, Llama Scope's hyperparams.json, ``hf:`` from a hub-cache snapshot
written here in huggingface_hub's layout, and ``saelens:`` through a release list in SAELens'
pretrained_saes.yaml format: each route gives the same weights, the hook and layer its files or
names say, and config.yaml's record (route, release, id, commit, SHA-256, Neuronpedia id)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import save_file

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.sae.files import load_sae, save_sae
from whitebox_eval.sae.sets import load_sae_set
from whitebox_eval.sae.sources import RELEASES_ENV, feature_links, resolve_sae

FIXTURES = Path(__file__).parents[1] / "fixtures" / "saelens"
COMMIT = "89abcdef0123456789abcdef0123456789abcdef"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """An empty hub cache (offline), and a function that adds a repository snapshot to it."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)

    def add(repo_id: str, files: dict[str, Path | bytes | str]) -> Path:
        repo = cache / f"models--{repo_id.replace('/', '--')}"
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / "main").write_text(COMMIT)
        snap = repo / "snapshots" / COMMIT
        for name, content in files.items():
            (snap / name).parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                shutil.copy(content, snap / name)
            else:
                (snap / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        return snap

    return add


def _gemma_scope_weights() -> dict[str, np.ndarray]:
    with np.load(FIXTURES / "gemma_scope" / "params.npz") as z:
        return {k: np.asarray(z[k]) for k in z.files}


def _encodings(sae, x):
    return sae.encode(x)


def test_gemma_scope_routes_agree(tmp_path, hub, monkeypatch):
    """One Gemma Scope SAE as Gemma Scope 1 (npz, hook from the repo name), Gemma Scope 2
    (safetensors + config.json's hf_hook_point_in), a SAELens folder, by hf: and by saelens:."""
    w = _gemma_scope_weights()
    d_in = w["W_enc"].shape[0]
    x = torch.randn(20, d_in, generator=torch.Generator().manual_seed(0)) * 3
    gs1 = hub("google/gemma-scope-2b-pt-mlp", {"layer_3/width_16k/average_l0_71/params.npz": FIXTURES / "gemma_scope" / "params.npz"})
    st = tmp_path / "params.safetensors"
    save_file({"w_enc": torch.from_numpy(w["W_enc"]), "w_dec": torch.from_numpy(w["W_dec"]), "b_enc": torch.from_numpy(w["b_enc"]),
               "b_dec": torch.from_numpy(w["b_dec"]), "threshold": torch.from_numpy(w["threshold"])}, str(st))
    gs2_cfg = json.dumps({"hf_hook_point_in": "model.layers.3.output", "width": int(w["W_enc"].shape[1]), "architecture": "jump_relu"})
    hub("google/gemma-scope-2-1b-pt", {"resid_post/layer_3_width_16k_l0_small/params.safetensors": st,
                                        "resid_post/layer_3_width_16k_l0_small/config.json": gs2_cfg})
    releases = tmp_path / "pretrained_saes.yaml"
    releases.write_text(yaml.safe_dump({"SAE_LOOKUP": {
        "gemma-scope-2b-pt-mlp-canonical": {"repo_id": "google/gemma-scope-2b-pt-mlp", "model": "gemma-2-2b",
                                            "conversion_func": "gemma_2", "saes": [
            {"id": "layer_3/width_16k/canonical", "path": "layer_3/width_16k/average_l0_71",
             "neuronpedia": "gemma-2-2b/3-gemmascope-mlp-16k"}]}}}))
    monkeypatch.setenv(RELEASES_ENV, str(releases))
    reference = load_sae(FIXTURES / "gemma_scope" / "params.npz")
    local_saelens = save_sae(reference, tmp_path / "saelens_folder")
    routes = {
        "local npz": (str(FIXTURES / "gemma_scope"), None),
        "saelens folder": (str(local_saelens), None),
        "hf gemma scope 1": ("hf:google/gemma-scope-2b-pt-mlp/layer_3/width_16k/average_l0_71", "blocks.3.hook_mlp_out"),
        "hf gemma scope 2": ("hf:google/gemma-scope-2-1b-pt/resid_post/layer_3_width_16k_l0_small", "blocks.3.hook_resid_post"),
        "saelens release": ("saelens:gemma-scope-2b-pt-mlp-canonical/layer_3/width_16k/canonical", "blocks.3.hook_mlp_out"),
    }
    expect = reference.encode(x)
    assert (expect > 0).any()
    for name, (source, hook) in routes.items():
        spec = source if hook else f"3={source}"
        sae_set = load_sae_set([spec])
        torch.testing.assert_close(sae_set.saes[0].encode(x), expect, atol=1e-5, rtol=1e-5, msg=name)
        if hook:
            assert sae_set.sources[0]["hook"] == hook and sae_set.layers == [3], name
    rec = load_sae_set([routes["saelens release"][0]]).sources[0]
    assert rec["route"] == "saelens" and rec["release"] == "gemma-scope-2b-pt-mlp-canonical"
    assert rec["revision"] == COMMIT and rec["repo_id"] == "google/gemma-scope-2b-pt-mlp"
    assert rec["neuronpedia"] == "gemma-2-2b/3-gemmascope-mlp-16k" and len(rec["sha256"]) == 64
    assert Path(rec["path"]) == gs1 / "layer_3/width_16k/average_l0_71"
    links = feature_links([rec], [np.array([5, 9]), np.array([5])], 20)
    assert links["top_features"][0] == {"unit": "0.5", "layer": 3, "feature": 5, "n_items": 2,
                                        "neuronpedia": "gemma-2-2b/3-gemmascope-mlp-16k/5",
                                        "link": "https://www.neuronpedia.org/gemma-2-2b/3-gemmascope-mlp-16k/5"}


def test_llama_scope_routes_agree(tmp_path, hub, monkeypatch):
    folder = FIXTURES / "llama_scope"
    hub("fnlp/Llama3_1-8B-Base-LXR-8x", {"Llama3_1-8B-Base-L3R-8x/hyperparams.json": folder / "hyperparams.json",
                                         "Llama3_1-8B-Base-L3R-8x/checkpoints/final.safetensors":
                                             folder / "checkpoints" / "final.safetensors"})
    releases = tmp_path / "r.yaml"
    releases.write_text(yaml.safe_dump({"SAE_LOOKUP": {"llama_scope_lxr_8x": {
        "repo_id": "fnlp/Llama3_1-8B-Base-LXR-8x", "model": "meta-llama/Llama-3.1-8B", "conversion_func": "llama_scope",
        "saes": [{"id": "l3r_8x", "path": "Llama3_1-8B-Base-L3R-8x", "neuronpedia": "llama3.1-8b/3-llamascope-res-32k"}]}}}))
    monkeypatch.setenv(RELEASES_ENV, str(releases))
    x = torch.randn(12, 16, generator=torch.Generator().manual_seed(1)) * 4
    expect = load_sae(folder).encode(x)
    for source in (str(folder), "hf:fnlp/Llama3_1-8B-Base-LXR-8x/Llama3_1-8B-Base-L3R-8x", "saelens:llama_scope_lxr_8x/l3r_8x"):
        s = load_sae_set([source])
        assert (s.point, s.layers) == ("resid", [3])  # hyperparams.json's hook_point_in: blocks.3.hook_resid_post
        torch.testing.assert_close(s.saes[0].encode(x), expect, msg=source)


def test_bad_names_are_one_line(tmp_path, hub, monkeypatch):
    releases = tmp_path / "r.yaml"
    releases.write_text(yaml.safe_dump({"SAE_LOOKUP": {"rel": {"repo_id": "o/r", "saes": [{"id": "a", "path": "a"}]}}}))
    monkeypatch.setenv(RELEASES_ENV, str(releases))
    with pytest.raises(WhiteboxError, match="release 'nope' is not in"):
        resolve_sae("saelens:nope/a")
    with pytest.raises(WhiteboxError, match="SAE id 'b' is not in release 'rel'"):
        resolve_sae("saelens:rel/b")
    with pytest.raises(WhiteboxError, match="not in the Hugging Face cache"):
        resolve_sae("saelens:rel/a")
    with pytest.raises(WhiteboxError, match="give hf:ORG/REPO/PATH"):
        resolve_sae("hf:justone")
    monkeypatch.setenv(RELEASES_ENV, str(tmp_path / "missing.yaml"))
    with pytest.raises(WhiteboxError, match="which is no file"):
        resolve_sae("saelens:rel/a")


def test_explorer_feature_view_links_neuronpedia(tmp_path, monkeypatch):
    """A run whose SAE came from a release with a Neuronpedia id shows each feature's id and link."""
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1]))
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "report"))
    from explorer_runs import mui_sae

    from whitebox_eval.report.explorer_views import suite_views
    from whitebox_eval.report.rundata import load_run

    folder = mui_sae(tmp_path)
    results = json.loads((folder.path / "results.json").read_text())
    assert results["sae_features"]["top_features"] and "link" not in results["sae_features"]["top_features"][0]
    cfg = yaml.safe_load((folder.path / "config.yaml").read_text())
    cfg["sae_sources"][0].update(neuronpedia="gemma-2-2b/1-gemmascope-res-16k",
                                 neuronpedia_url="https://www.neuronpedia.org/gemma-2-2b/1-gemmascope-res-16k")
    (folder.path / "config.yaml").write_text(yaml.safe_dump(cfg))
    run = load_run(folder.path)
    feats = suite_views(run, run.samples)["features"]
    index = int(feats[0]["unit"].split(".")[1])
    assert feats[0]["neuronpedia"] == f"gemma-2-2b/1-gemmascope-res-16k/{index}"
    assert feats[0]["link"] == f"https://www.neuronpedia.org/gemma-2-2b/1-gemmascope-res-16k/{index}"
    cfg["sae_sources"][0]["neuronpedia_url"] = "javascript:alert(1)"  # never a link of another scheme
    (folder.path / "config.yaml").write_text(yaml.safe_dump(cfg))
    run = load_run(folder.path)
    assert "link" not in suite_views(run, run.samples)["features"][0]
