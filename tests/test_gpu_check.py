"""benchmarks/gpu_check.py runs on the CPU at tiny sizes: the same code the GPU check runs."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gpu_check  # noqa: E402


def test_tiny_check_measures_every_model(tmp_path, capsys):
    rows = gpu_check.main(["--tiny", "--out", str(tmp_path / "gpu.md")])
    assert [r["model"] for r in rows] == [f"{m} (tiny)" for m in gpu_check.CONFIGS]
    for r in rows:
        assert r["logits_argmax_equal"] and r["logits_max_abs_diff"] <= 1e-5  # the engine's logits are the model's
        for label in ("0-shot", "5-shot"):
            assert r[f"{label}_plain_ms"] > 0 and math.isfinite(r[f"{label}_overhead"])
        assert r["study_items"] == 4 and r["study_tokens_per_s"] > 0
    table = (tmp_path / "gpu.md").read_text()
    assert "tiny configs" in table and table.split("Per pass and phase")[0].count("(tiny)") == 3
    assert json.loads((tmp_path / "gpu.json").read_text()) == rows
    assert "| model |" in capsys.readouterr().out


def test_a_logits_mismatch_is_recorded_and_the_other_models_still_run(monkeypatch):
    from whitebox_eval.internals import Engine

    unembed = Engine.unembed

    def shifted(self, hidden):  # llama's logits off by one: the engine no longer matches the model
        out = unembed(self, hidden)
        return out + 1.0 if self.arch.family.name == "llama" else out

    monkeypatch.setattr(Engine, "unembed", shifted)
    rows = gpu_check.main(["--tiny"])
    assert [r["model"] for r in rows] == [f"{m} (tiny)" for m in gpu_check.CONFIGS]  # none skipped
    assert [r["logits_ok"] for r in rows] == [False, True, True]
    assert all(r["study_tokens_per_s"] > 0 for r in rows)  # the mismatched model was measured too


def test_the_prepared_gpu_call_runs_at_tiny_sizes(tmp_path):
    """The prepared GPU call (batch 8 and 32, 0- and 5-shot, the three shapes, phases) on the CPU:
    one row per model and batch, the first batch's rows in the file reproduce/costs.py reads, the
    others beside it; plain and white-box interleaved, plain with and without HF's cache, and per
    phase the host times and the ops and syncs of one counted call."""
    rows = gpu_check.main(["--tiny", "--batches", "8,32", "--budget", "420", "--out", str(tmp_path / "gpu_check.md")])
    assert [(r["model"], r["batch"]) for r in rows] == [(f"{m} (tiny)", b) for m in gpu_check.CONFIGS for b in (2, 6)]
    for r in rows:
        assert r["logits_ok"] and "skipped" not in r
        for label in ("0-shot", "5-shot"):
            assert r[f"{label}_plain_nocache_ms"] > 0 and math.isfinite(r[f"{label}_overhead_nocache"])
            for m in ("plain", "plain_nocache", "whitebox"):
                assert all(r[f"{label}_{m}_{p}_ms"] >= 0 for p in ("before", "forward", "after"))
                assert r[f"{label}_{m}_ops_forward"] > 0
            # the white-box pass reads no device value inside the forward beyond what the plain pass does
            assert r[f"{label}_whitebox_syncs_forward"] <= r[f"{label}_plain_nocache_syncs_forward"]
            assert r[f"{label}_whitebox_syncs_after"] <= 1  # every score back in one copy
    first = json.loads((tmp_path / "gpu_check.json").read_text())
    assert {r["batch"] for r in first} == {2} and "0-shot_whitebox_tokens_per_s" in first[0]
    assert {r["batch"] for r in json.loads((tmp_path / "gpu_check_batch6.json").read_text())} == {6}
    assert "Per pass and phase" in (tmp_path / "gpu_check.md").read_text()


def test_a_model_past_the_budget_is_recorded_as_skipped(monkeypatch):
    monkeypatch.setattr(gpu_check, "check", lambda *a, **k: (_ for _ in ()).throw(AssertionError("not skipped")))
    monkeypatch.setattr(gpu_check.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(gpu_check.torch.cuda, "get_device_name", lambda *a: "a GPU")
    rows = gpu_check.main(["--models", "gemma-2-9b", "--batches", "8,32", "--budget", "10", "--no-phases"])
    assert [(r["model"], r["batch"], "budget" in r["skipped"]) for r in rows] == [("gemma-2-9b", 8, True),
                                                                                  ("gemma-2-9b", 32, True)]
