"""GAR run folders on the shared floor: a torn array part is recomputed on --resume (the
results equal an uninterrupted run's), and --resume refuses probe data that changed since
the run started (config.yaml's data_files), in one line with exit status 2."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar import intervene_study
from whitebox_eval.gar.intervene_study import GARInterveneConfig, run_gar_intervene
from whitebox_eval.gar.truth_heads import GARHeadsConfig, run_gar_heads

G2C = "GendersOfPersons/same,KindsOfThings/kindOf×3 [g2c]"


def _arrays(path):
    return {p.name: np.load(p) for p in sorted((path / "arrays").glob("*.npy"))}


def test_a_torn_part_is_recomputed_on_resume(tmp_path, tiny_real_vocab, monkeypatch):
    cfg = GARInterveneConfig(model="tiny", tasks=G2C, limit=6, heads="0.1,1.2", pattern="Q->A", batch_size=2)
    full = run_gar_intervene(cfg, tmp_path, run_id="full", loaded=tiny_real_vocab)
    torn = tmp_path / "torn"
    shutil.copytree(full.path, torn)
    (torn / "results.json").unlink()
    part = torn / "arrays" / "parts" / "base" / "00000002.npz"  # examples 2 and 3 of the unedited pass
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])  # a part cut short, as a disk fault could leave it

    calls = []
    real = intervene_study.score_batch
    monkeypatch.setattr(intervene_study, "score_batch",
                        lambda engine, chunk, **kw: calls.append(len(chunk)) or real(engine, chunk, **kw))
    resumed = run_gar_intervene(cfg, tmp_path, run_id="torn", resume=True, loaded=tiny_real_vocab)
    assert calls == [2]  # only the torn batch was scored again
    assert (part.parent / "00000002.npz.unreadable").is_file() and part.is_file()
    assert "00000002.npz is unreadable" in (torn / "run.log").read_text()
    assert resumed.load_results() == full.load_results()
    assert (torn / "samples.jsonl").read_bytes() == (full.path / "samples.jsonl").read_bytes()
    a, b = _arrays(full.path), _arrays(torn)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)


def _write_got(path, flip: int | None = None):
    rows = [(f"The city of Town{i} is in Country{i if i % 2 else i + 1}.", i % 2) for i in range(20)]
    if flip is not None:
        rows[flip] = (rows[flip][0], 1 - rows[flip][1])
    path.write_text("statement,label\n" + "".join(f"{s},{y}\n" for s, y in rows))


def test_resume_refuses_probe_data_that_changed(tmp_path, tiny_real_vocab, cli):
    model = tmp_path / "tiny"
    tiny_real_vocab.model.save_pretrained(model)
    tiny_real_vocab.tokenizer.save_pretrained(model)
    got = tmp_path / "got.csv"
    _write_got(got)
    args = ["gar", "--mode", "probe", "--model", str(model), "--heads", "0.0,1.1", "--folds", "2",
            "--random-draws", "1", "--probe-data", str(got), "--output", str(tmp_path / "runs"), "--run-id", "p"]

    def run(argv: list[str]) -> tuple[int, str]:
        code, _, err = cli(argv)
        return code, err

    assert run(args)[0] == 0
    conf = yaml.safe_load((tmp_path / "runs" / "p" / "config.yaml").read_text())
    assert [f["path"] for f in conf["data_files"]] == [str(got)] and len(conf["data_files"][0]["sha256"]) == 64
    assert run(args + ["--resume"])[0] == 0  # same data: resumes
    _write_got(got, flip=3)
    code, err = run(args + ["--resume"])
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and f"data file {got} changed since the run started" in lines[0]


def test_truth_heads_records_its_probe_data(tmp_path, tiny_real_vocab):
    got = tmp_path / "got.csv"
    _write_got(got)
    cfg = GARHeadsConfig(model="tiny", tasks=G2C, limit=4, steps=1, n_candidates=4, random_draws=0,
                         probe_data=(str(got),), probe_folds=2, batch_size=4)
    folder = run_gar_heads(cfg, tmp_path, run_id="h", loaded=tiny_real_vocab)
    conf = yaml.safe_load((folder.path / "config.yaml").read_text())
    assert [f["path"] for f in conf["data_files"]] == [str(got)]
    samples = [json.loads(line) for line in (folder.path / "samples.jsonl").read_text().splitlines()]
    assert sum(s["stage"] == "probe-got" for s in samples) == 20
    _write_got(got, flip=0)
    with pytest.raises(WhiteboxError, match="changed since the run started"):
        run_gar_heads(cfg, tmp_path, run_id="h", resume=True, loaded=tiny_real_vocab)
