"""Every script in examples/ runs, end to end, at a micro size on tiny models, so a change of
the API they call cannot break one silently."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "faults"))
from cases import build_model_dir, build_smollm2_vocab_model_dir  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(build_model_dir(tmp_path_factory.mktemp("examples") / "tiny"))


def run_script(path: Path, *args: str, monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", [str(path), *args])
    runpy.run_path(str(path), run_name="__main__")


def test_mcqa_ssd_options(tiny, tmp_path, monkeypatch, capsys):
    run_script(EXAMPLES / "mcqa_ssd_options.py", "--model", tiny, "--options", "2,4", "--limit", "56",
               "--output", str(tmp_path), "--batch-size", "8", monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert "  2 options: baseline" in out and "  4 options: baseline" in out
    assert (tmp_path / "tiny-accuracy_vs_options.png").is_file()


def test_mui_contamination(tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WHITEBOX_EVAL_CACHE", str(tmp_path / "cache"))  # the fine-tuned weights' cache
    run_script(EXAMPLES / "mui_contamination.py", "--model", tiny, "--limit", "4", "--epochs", "1",
               "--train-batch-size", "2", "--max-new-tokens", "3", "--output", str(tmp_path / "runs"),
               monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert "fine-tune:" in out and "results:" in out and "step-2" in out
    assert list((tmp_path / "cache" / "finetuned" / "contamination").glob("*/step-2/config.json"))


def test_span_finetune_study(tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WHITEBOX_EVAL_CACHE", str(tmp_path / "cache"))  # the fine-tuned weights' cache
    run_script(EXAMPLES / "span_finetune_study.py", "--model", tiny, "--train", "4", "--limit", "4",
               "--key-samples", "4", "--heads", "1", "--values", "1.0", "--random-draws", "2",
               "--output", str(tmp_path), "--run-id", "ex", monkeypatch=monkeypatch)
    assert "wall time" in capsys.readouterr().out
    assert (tmp_path / "ex" / "results.json").is_file()


@pytest.mark.integration  # GAR's first-token scoring needs a word-initial vocabulary: the bundled tokenizer
def test_gar_models(tmp_path, monkeypatch, capsys):
    from whitebox_eval import studies

    smol = build_smollm2_vocab_model_dir(tmp_path / "tiny_smol")
    run = studies.gar("evaluate", tmp_path / "runs", model=str(smol), tasks="all", limit=2, show_progress=False)
    run_script(EXAMPLES / "gar_models.py", str(run.folder), "--plot", str(tmp_path / "gar.png"),
               monkeypatch=monkeypatch)
    assert "| overall generation |" in capsys.readouterr().out
    assert (tmp_path / "gar.png").is_file()


def test_every_example_has_a_test():
    tested = {name.removeprefix("test_") + ".py" for name in globals() if name.startswith("test_")}
    scripts = {p.name for p in EXAMPLES.glob("*.py")}
    assert scripts <= tested, f"examples without a test here: {sorted(scripts - tested)}"
