"""Bad input to ``reproduce --launcher slurm`` is one line, exit 2, before any folder: no
``sbatch``/``srun`` on PATH, an unknown ``--slurm-arg``, submitit not installed; ``--help``
imports no submitit; ``--plan-only --launcher slurm --scale paper`` lists every job's resources."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _args(paper, model, out, *extra):
    return ["reproduce", paper, "--scale", "micro", "--model", model, "--output", str(out), "--launcher", "slurm",
            *extra]


@pytest.fixture
def gated_paper(gated, write_paper):
    return write_paper([{"id": "a", "settings": {"limit": 4}}])


def test_no_sbatch_on_path_is_one_line(cli, gated_paper, tiny_model, tmp_path, monkeypatch):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, out, err = cli(_args(gated_paper, tiny_model, tmp_path / "out"))
    assert code == 2 and "no sbatch, srun, sacct on PATH" in err and "--launcher local" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_an_unknown_slurm_arg_is_refused_by_submitits_names(cli, fake_slurm_on_path, gated_paper, tiny_model, tmp_path):
    code, out, err = cli(_args(gated_paper, tiny_model, tmp_path / "out", "--slurm-arg", "constrant=h100"))
    assert code == 2 and "--slurm-arg constrant: not a parameter submitit's SlurmExecutor takes" in err
    assert "(did you mean 'constraint'?)" in err and not (tmp_path / "out").exists()
    assert fake_slurm_on_path.records() == []
    code, _, err = cli(_args(gated_paper, tiny_model, tmp_path / "out", "--slurm-arg", "novalue"))
    assert code == 2 and "give KEY=VALUE" in err


def test_without_submitit_the_extra_is_named(cli, fake_slurm_on_path, gated_paper, tiny_model, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "submitit", None)  # as if not installed: importing it raises ImportError
    code, out, err = cli(_args(gated_paper, tiny_model, tmp_path / "out"))
    assert code == 2 and "--launcher slurm needs submitit, an optional extra: pip install 'whitebox-eval[cluster]'" in err
    assert not (tmp_path / "out").exists()


def test_slurm_options_need_the_slurm_launcher(cli, gated_paper, tiny_model, tmp_path):
    code, _, err = cli(["reproduce", gated_paper, "--scale", "micro", "--model", tiny_model, "--slurm-max-jobs", "2",
                        "--output", str(tmp_path / "out")])
    assert code == 2 and "--slurm-max-jobs: only with --launcher slurm" in err and not (tmp_path / "out").exists()


def test_help_imports_no_submitit():
    probe = ("import sys\nfrom whitebox_eval.cli import main\ntry:\n    main(['reproduce', '--help'])\n"
             "except SystemExit:\n    pass\nprint('SUBMITIT=' + str('submitit' in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "--launcher [local|slurm]" in out and out.strip().splitlines()[-1] == "SUBMITIT=False"


def test_plan_only_lists_every_job_with_its_resources(cli, tmp_path, shared_datasets):
    """At --scale paper the 70B children ask for several GPUs; nothing is submitted (no sbatch needed).
    The plan locates 000's data files, so it needs the shared samples (skipped, with the reason, without)."""
    code, out, _ = cli(["reproduce", "000", "--scale", "paper", "--plan-only", "--launcher", "slurm",
                        "--output", str(tmp_path / "out"), "--data-root", str(shared_datasets)])
    assert code == 0
    planned = [ln for ln in out.splitlines() if ln.startswith("  [") and "not run" not in ln]
    jobs = [ln for ln in out.splitlines() if ln.startswith("  job ")]
    assert len(jobs) == len(planned) > 0 and f"Slurm jobs ({len(jobs)};" in out
    big = [ln for ln in jobs if "70b" in ln.lower()]
    assert big and all("3 GPUs (--device-map auto)" in ln for ln in big), big[:2]
    assert all(" GB memory, " in ln and " h (" in ln for ln in jobs)
    assert not (tmp_path / "out").exists()
