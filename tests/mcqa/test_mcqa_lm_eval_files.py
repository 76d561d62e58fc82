"""An MCQA run's files in lm-eval's layout on a tiny random llama."""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_mcqa_study import tiny_mcqa_model  # noqa: E402,F401  (module fixture)

from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa  # noqa: E402
from whitebox_eval.runs.lm_eval_format import doc_hash  # noqa: E402

N = 12


def _hellaswag(path: Path, n: int = N) -> Path:
    rng = random.Random(0)
    words = "the man a woman runs jumps into pool then slowly quickly ball table".split()
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            endings = [" ".join(rng.choice(words) for _ in range(3 + j)) + "." for j in range(4)]
            f.write(json.dumps({"ind": i, "activity_label": "Sports", "ctx": f"A person {i} is", "endings": endings,
                                "label": i % 4}) + "\n")
    return path


def test_samples_results_and_config_carry_lm_eval_fields(tiny_mcqa_model, tmp_path):  # noqa: F811
    data = _hellaswag(tmp_path / "hs.jsonl")
    cfg = MCQAConfig(model="tiny", task=f"hellaswag={data}", limit=None, min_val_items=4, batch_size=4,
                     methods=("baseline", "qk", "cloze"))
    run = run_mcqa(cfg, tmp_path / "runs", run_id="r", loaded=tiny_mcqa_model, show_progress=False)
    # config.yaml: the data file by content
    assert run.config["data_files"] == [{"path": str(data), "sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
                                         "bytes": data.stat().st_size}]
    # samples.jsonl: lm-eval's --log_samples fields, per item, in item order
    samples = list(run.read_samples())
    assert [s["doc_id"] for s in samples] == list(range(N))
    for s in samples:
        assert s["target"] == str(s["gold"]) and s["doc"]["gold"] == s["gold"]
        assert s["doc"]["subject"] == "Sports" and len(s["doc"]["choices"]) == 4
        assert s["prompt_hash"] == hashlib.sha256(s["prompt"].encode()).hexdigest()
        assert s["doc_hash"] == doc_hash(s["doc"]) and s["prompt"].rstrip().endswith("Answer:")
        assert s["doc"]["context"] in s["prompt"] and s["continuations"] == [" " + x for x in s["labels"]]
        assert s["acc,baseline"] in (0.0, 1.0) and s["acc,cloze"] in (0.0, 1.0) and "acc,qk_head" in s
    res = run.load_results()
    # per-item acc agrees with the headline on the items it counts (the test split, or all items)
    test = set(res["split"]["test_ids"])
    assert 0 < len(test) < N
    for key in ("acc,baseline", "acc,cloze", "acc_norm,cloze", "acc,qk_head"):
        n = res["headline"][key.replace(",", "_n,")]
        per_item = [s[key] for s in samples if n == N or s["id"] in test]
        assert len(per_item) == n and sum(per_item) / n == pytest.approx(res["headline"][key], abs=1e-12)
    # results.json: lm-eval's blocks beside ours
    entry = res["results"]["hellaswag"]
    for key in ("acc,baseline", "acc,cloze", "acc_norm,cloze"):
        assert entry[key] == res["headline"][key]
        assert entry[key.replace(",", "_stderr,")] == res["headline"][key.replace(",", "_stderr,")]
    assert res["n-samples"]["hellaswag"]["effective"] == N and res["n-shot"] == {"hellaswag": 0}
    assert res["config"]["model"] == "tiny" and res["configs"]["hellaswag"]["dataset_path"] == str(data)
    assert res["n_items"] == N and "headline" in res  # our keys stay


def test_resume_refuses_a_changed_data_file(tiny_mcqa_model, tmp_path):  # noqa: F811
    data = _hellaswag(tmp_path / "hs.jsonl", 8)
    cfg = MCQAConfig(model="tiny", task=f"hellaswag={data}", limit=None, min_val_items=4, batch_size=4,
                     methods=("baseline",))
    run_mcqa(cfg, tmp_path / "runs", run_id="r", loaded=tiny_mcqa_model, show_progress=False)
    lines = data.read_text().splitlines()
    data.write_text("\n".join(lines[:-1] + [lines[-1].replace('"label": 3', '"label": 2')]) + "\n")
    with pytest.raises(WhiteboxError, match=r"data file .*hs\.jsonl changed since the run started"):
        run_mcqa(cfg, tmp_path / "runs", run_id="r", resume=True, loaded=tiny_mcqa_model, show_progress=False)


def test_formats_run_records_its_data_and_lm_eval_blocks(tiny_mcqa_model, tmp_path):  # noqa: F811
    from whitebox_eval.formats.study import FormatsConfig, run_formats

    cfg = FormatsConfig(model="tiny", task="arithmetic:add1", limit=3, shots=1, n_samples=2, max_new_tokens=3,
                        n_bins=2, batch_size=3)
    folder = run_formats(cfg, tmp_path, run_id="f", loaded=tiny_mcqa_model, show_progress=False)
    assert folder.config["data_files"] == []  # synthetic: nothing read
    res = folder.load_results()
    entry = res["results"]["arithmetic"]
    assert entry["p_correct,renorm"] == res["p_correct,renorm"]
    assert entry["p_correct_stderr,renorm"] == res["p_correct_stderr,renorm"]
    assert res["n-shot"] == {"arithmetic": 1} and entry["sample_len"] == 3
    assert "n-samples" not in res  # --limit 3 of a generated pool whose size the run does not state
    assert res["higher_is_better"] == {"arithmetic": {"p_correct": True, "alignment_error": False}}
