"""``saelens:`` without sae-lens: a dated snapshot of SAELens' release list
shipped as package data (its MIT notice beside it), refreshed by a script, and a warning when a
release's model is not ``--model``."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.sae import sources
from whitebox_eval.sae.sources import RELEASES_ENV, check_sources, lookup_release, model_mismatch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "refresh_saelens_releases.py"
COMMIT = "fedcba9876543210fedcba9876543210fedcba98"


def test_the_shipped_snapshot_names_releases_without_sae_lens(monkeypatch):
    monkeypatch.delenv(RELEASES_ENV, raising=False)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not (Path(p or ".") / "sae_lens").is_dir()])
    entry = lookup_release("gemma-scope-2b-pt-res-canonical", "layer_20/width_16k/canonical")
    assert entry["repo_id"] == "google/gemma-scope-2b-pt-res" and entry["model"] == "gemma-2-2b"
    assert entry["path"] == "layer_20/width_16k/average_l0_71"
    assert entry["neuronpedia"] == "gemma-2-2b/20-gemmascope-res-16k"
    assert "shipped with whitebox-eval" in entry["release_list"] and "sae_lens" not in sys.modules
    with pytest.raises(WhiteboxError, match="release 'gemma-scope-2b-pt-rez' is not in .*similar: gemma-scope"):
        lookup_release("gemma-scope-2b-pt-rez", "x")
    notice = (sources.SNAPSHOT.parent / "saelens_releases.LICENSE").read_text()
    assert "MIT License" in notice and "Copyright (c) 2023 Joseph Bloom" in notice


def test_the_refresh_script_writes_the_same_bytes_from_the_same_list(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "sae_lens"
    pkg.mkdir(parents=True)
    (pkg / "pretrained_saes.yaml").write_text(yaml.safe_dump({
        "rel-b": {"repo_id": "o/b", "model": "m-b", "conversion_func": "x", "saes": [
            {"id": "s1", "path": "p/1", "neuronpedia": "m-b/1", "l0": 5, "repo_id": "o/other"}]},
        "rel-a": {"repo_id": "o/a", "model": "m-a", "saes": [{"id": "s0", "path": "p/0"}]}}))
    (tmp_path / "site" / "LICENSE").write_text("MIT License\n\nCopyright (c) 2023 Joseph Bloom\n")
    outs = []
    for n in (1, 2):
        out = tmp_path / f"out{n}" / "saelens_releases.json.gz"
        got = subprocess.run([sys.executable, str(SCRIPT), "--from", str(pkg / "pretrained_saes.yaml"), "--version",
                              "9.9.9", "--date", "2026-01-02", "--out", str(out)], capture_output=True, text=True)
        assert got.returncode == 0, got.stderr
        assert "2 releases, 2 SAEs, sae-lens 9.9.9" in got.stdout
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    data = json.loads(gzip.decompress(outs[0]))
    assert list(data["releases"]) == ["rel-a", "rel-b"] and data["source"]["taken"] == "2026-01-02"
    assert data["releases"]["rel-b"]["saes"] == [{"id": "s1", "path": "p/1", "neuronpedia": "m-b/1", "repo_id": "o/other"}]
    assert "Joseph Bloom" in (tmp_path / "out1" / "saelens_releases.LICENSE").read_text()
    # read as the shipped list: an SAE's own repo_id wins over its release's
    monkeypatch.delenv(RELEASES_ENV, raising=False)
    monkeypatch.setattr(sources, "SNAPSHOT", tmp_path / "out1" / "saelens_releases.json.gz")
    assert lookup_release("rel-b", "s1")["repo_id"] == "o/other"
    # a release the snapshot lacks is looked up in an installed sae-lens's list
    (pkg / "pretrained_saes.yaml").write_text(yaml.safe_dump({"rel-new": {"repo_id": "o/n", "saes": [{"id": "s"}]}}))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    entry = lookup_release("rel-new", "s")
    assert entry["repo_id"] == "o/n" and entry["release_list"] == str(pkg / "pretrained_saes.yaml")


def test_a_list_without_a_licence_is_refused(tmp_path):
    listing = tmp_path / "a" / "sae_lens" / "pretrained_saes.yaml"
    listing.parent.mkdir(parents=True)
    listing.write_text(yaml.safe_dump({"r": {"repo_id": "o/r", "saes": []}}))
    got = subprocess.run([sys.executable, str(SCRIPT), "--from", str(listing), "--out", str(tmp_path / "o.json.gz")],
                         capture_output=True, text=True)
    assert got.returncode != 0 and "no MIT licence" in got.stderr and not (tmp_path / "o.json.gz").exists()


@pytest.mark.parametrize("release_model, model, differs", [
    ("gemma-2-2b", "google/gemma-2-2b", False), ("gpt2-small", "gpt2", False),
    ("google/gemma-3-270m", "gemma3-270m", False), ("meta-llama/Llama-3.1-8B", "/models/llama-3.1-8b@main", False),
    ("gemma-2-2b", "smollm2-135m", True), ("pythia-70m-deduped", "gemma3-270m", True), (None, "x", False)])
def test_a_release_of_another_model(release_model, model, differs):
    assert model_mismatch(release_model, model) is differs


def test_check_sources_warns_when_the_release_is_for_another_model(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    snap = tmp_path / "hub" / "models--o--saes" / "snapshots" / COMMIT / "l3"
    snap.mkdir(parents=True)
    (snap.parents[2] / "refs").mkdir()
    (snap.parents[2] / "refs" / "main").write_text(COMMIT)
    (snap / "cfg.json").write_text("{}")
    releases = tmp_path / "r.yaml"
    releases.write_text(yaml.safe_dump({"rel": {"repo_id": "o/saes", "model": "gemma-2-2b",
                                                "saes": [{"id": "a", "path": "l3"}]}}))
    monkeypatch.setenv(RELEASES_ENV, str(releases))
    with pytest.warns(UserWarning, match="release rel was made for gemma-2-2b, not --model smollm2-135m"):
        check_sources(["saelens:rel/a"], "smollm2-135m")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_sources(["3=saelens:rel/a"], "google/gemma-2-2b")  # the same model: no warning
