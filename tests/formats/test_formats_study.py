"""The formats study (paper 004) on a tiny random llama with a trained fast tokenizer."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from whitebox_eval.formats import study as fs
from whitebox_eval.formats import metrics as m
from whitebox_eval.formats.over_runs import compare_runs
from whitebox_eval.tasks.arithmetic import make_arithmetic_suite
from whitebox_eval.internals.generation import inverse_cdf, sampling_probs
from whitebox_eval.formats.generation import sample_prompt, stream_seed
from whitebox_eval.tasks.prompts import render_prompt
from whitebox_eval.runs import RunFolder

sys.path.insert(0, str(Path(__file__).parents[1]))
from tiny_models import tiny_formats_llama  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    return tiny_formats_llama()


def _cfg(**kw):
    base = dict(model="tiny", task="arithmetic:add1,add2,mul1", limit=6, n_samples=4, max_new_tokens=5, n_bins=2)
    return fs.FormatsConfig(**{**base, **kw})


# --------------------------------------------------------------------------- protocol


def test_five_shot_by_default_with_demos_disjoint_from_the_questions(tiny, tmp_path):
    assert fs.FormatsConfig().shots == 5
    folder = fs.run_formats(_cfg(), tmp_path, run_id="r", loaded=tiny, show_progress=False)
    demo_ids = folder.config["demo_ids"]
    assert len(demo_ids) == 5
    data = fs.load_format_items(_cfg(), tiny.tokenizer)
    demo_q = {d.question for d in data.demos}
    assert [d.id for d in data.demos] == demo_ids
    assert not demo_q & {it.question for it in data.items}
    # every format's prompt carries the five demonstrations, each answered
    it = data.items[0]
    assert render_prompt(it, fmt="free", demos=data.demos).text.count("Question:") == 6
    assert folder.load_results()["shots"] == 5


def test_limit_is_a_stratified_sample_not_the_first_n(tiny):
    data = fs.load_format_items(fs.FormatsConfig(task="arithmetic", limit=20, n_bins=2), tiny.tokenizer)
    cats = Counter(it.subject for it in data.items)
    golds = Counter(it.gold for it in data.items)
    assert len(cats) == 16 and max(cats.values()) - min(cats.values()) <= 1  # 20 over 16 categories
    assert sorted(golds) == [0, 1, 2, 3] and max(golds.values()) - min(golds.values()) <= 1
    assert "stratified" in data.notes["selection"]


def test_stratified_sample_allocates_in_proportion_and_balances_gold():
    items = make_arithmetic_suite(40, seed=0, categories=("add1", "add2")) + make_arithmetic_suite(
        20, seed=0, categories=("mul1",))
    got = fs.stratified_sample(items, 25, seed=1)
    assert Counter(it.subject for it in got) == {"add1": 10, "add2": 10, "mul1": 5}
    g = Counter(it.gold for it in got)
    assert max(g.values()) - min(g.values()) <= 1
    assert got == fs.stratified_sample(items, 25, seed=1)  # seeded
    assert fs.stratified_sample(items, 500, seed=1) == items


# --------------------------------------------------------------------------- reproducible sampling


def test_samples_are_byte_identical_for_any_batch_size_and_resume(tiny, tmp_path):
    a = fs.run_formats(_cfg(batch_size=1), tmp_path, run_id="a", loaded=tiny, show_progress=False)
    b = fs.run_formats(_cfg(batch_size=8), tmp_path, run_id="b", loaded=tiny, show_progress=False)
    text = (a.path / "samples.jsonl").read_bytes()
    assert text == (b.path / "samples.jsonl").read_bytes()
    assert any(t for line in text.decode().splitlines() for t in json.loads(line)["generations"]["free"])
    # a run killed after two questions and resumed with another batch size: the same file
    c = fs.run_formats(_cfg(batch_size=3), tmp_path, run_id="c", loaded=tiny, show_progress=False)
    lines = (c.path / "samples.jsonl").read_text().splitlines(keepends=True)
    (c.path / "samples.jsonl").write_text("".join(lines[:2]))
    c = fs.run_formats(_cfg(batch_size=2), tmp_path, run_id="c", resume=True, loaded=tiny, show_progress=False)
    assert (c.path / "samples.jsonl").read_bytes() == text


def test_each_format_samples_from_its_own_stream(tiny):
    assert stream_seed(0, "q1", "free") != stream_seed(0, "q1", "free_options")
    assert stream_seed(0, "q1", "free") != stream_seed(0, "q2", "free") != stream_seed(1, "q1", "free")
    prompt = "Question: What is the value of 3 + 4?\nAnswer:"
    kw = dict(n_samples=8, temperature=1.0, max_new_tokens=4)
    free = sample_prompt(tiny, prompt, seed=stream_seed(0, "q1", "free"), **kw)
    opts = sample_prompt(tiny, prompt, seed=stream_seed(0, "q1", "free_options"), **kw)
    assert free == sample_prompt(tiny, prompt, seed=stream_seed(0, "q1", "free"), **kw)
    assert free != opts  # same prompt, separate streams: different texts


def test_inverse_cdf_sampling_by_hand():
    logits = torch.log(torch.tensor([[0.2, 0.5, 0.3]] * 4))

    def pick(rows, u, temperature):
        return inverse_cdf(sampling_probs(rows, temperature, dtype=torch.float64), u)

    assert pick(logits, np.array([0.1, 0.25, 0.69, 0.71]), 1.0).tolist() == [0, 1, 1, 2]
    # T = 2 flattens: softmax(log p / 2) ∝ sqrt(p) (float32 logits: a 1e-6 margin)
    q = np.sqrt([0.2, 0.5, 0.3])
    q /= q.sum()
    assert pick(logits[:1], np.array([q[0] - 1e-6]), 2.0).tolist() == [0]
    assert pick(logits[:1], np.array([q[0] + 1e-6]), 2.0).tolist() == [1]


def test_greedy_generation_equals_hf_generate(tiny):
    prompt = "Question: What is the value of 12 + 30?\nAnswer:"
    ours = sample_prompt(tiny, prompt, n_samples=2, temperature=0.0, max_new_tokens=6, seed=0, stop=None)
    ids = tiny.tokenizer(prompt, return_tensors="pt")["input_ids"]
    ref = tiny.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False,
                              pad_token_id=tiny.tokenizer.pad_token_id, eos_token_id=tiny.tokenizer.eos_token_id)
    text = tiny.tokenizer.decode(ref[0, ids.shape[1]:], skip_special_tokens=True)
    assert ours == [text, text]


# --------------------------------------------------------------------------- MCQ probabilities


def test_mcq_raw_renorm_and_letter_mass_from_the_full_softmax(tiny):
    from whitebox_eval.internals import Engine
    from whitebox_eval.tasks.prompt_tokens import tokenize_prompt

    data = fs.load_format_items(_cfg(), tiny.tokenizer)
    it = data.items[0]
    got = fs.mcq_probabilities(Engine(tiny), it, data.demos)
    t = tokenize_prompt(tiny.tokenizer, render_prompt(it, fmt="mcq_plain", demos=data.demos))
    with torch.no_grad():
        p = torch.softmax(tiny.model(input_ids=torch.tensor([t.input_ids])).logits[0, -1].double(), -1).numpy()
    letters = p[t.answer_ids]
    # float32 forward passes by two routes: agree to 1e-5 relative
    assert got["p_raw"] == pytest.approx(letters[it.gold], rel=1e-5)
    assert got["letter_mass"] == pytest.approx(letters.sum(), rel=1e-5)
    assert got["p_renorm"] == pytest.approx(letters[it.gold] / letters.sum(), rel=1e-5)
    assert got["pred"] == int(np.argmax(letters))
    assert got["top_is_letter"] == (int(np.argmax(p)) in t.answer_ids)  # else the first-token answer is off-format


# --------------------------------------------------------------------------- zero variance


def _fake_run(tmp_path, free, mcq, run_id="z", **cfg):
    c = _cfg(**cfg)
    folder = RunFolder.create(tmp_path, {**c.to_dict(), "demo_ids": [], "selection": "test"}, run_id=run_id)
    folder.append_samples([
        {"id": f"q{i}", "subject": "add1", "gold": 0, "answer": 5,
         "mcq": {"p_renorm": x, "p_raw": x / 2, "letter_mass": 0.5, "pred": 0 if x > 0.5 else 1},
         "p_correct": {"mcq": x, "free": y, "free_options": y},
         "generations": {"free": ["5", "9 + 2 = 5"], "free_options": ["", "3 = 5"]}}
        for i, (x, y) in enumerate(zip(mcq, free))])
    return fs.finalize_formats(folder, c, "number")


def test_zero_variance_is_reported_not_crashed(tmp_path):
    from whitebox_eval.formats.command import formats_summary

    folder = _fake_run(tmp_path, free=[0.0] * 6, mcq=[0.1, 0.9, 0.4, 0.6, 0.2, 0.8])
    res = json.loads((folder.path / "results.json").read_text())
    assert res["pearson,mcq~free"] is None and res["pearson_reason,mcq~free"] == "no variance in free"
    assert res["pearson_reason,free~free_options"] == "no variance in free and free_options"
    lines = "\n".join(formats_summary(res, folder.path))
    assert "undefined (no variance in free)" in lines


def test_correlation_or_reason():
    assert m.correlation_or_reason([0, 1, 2], [1, 3, 2]) == (pytest.approx(0.5), None)
    assert m.correlation_or_reason([1, 1], [0, 1], ("mcq", "free")) == (None, "no variance in mcq")


# --------------------------------------------------------------------------- statistics


def test_headlines_carry_intervals_and_n(tmp_path):
    from whitebox_eval.formats.command import formats_summary

    x = [0.1, 0.9, 0.4, 0.6, 0.2, 0.8]
    y = [0.0, 1.0, 0.5, 0.5, 0.0, 0.5]
    res = _fake_run(tmp_path, free=y, mcq=x).load_results()
    for key in ("p_correct,renorm", "p_correct,raw", "letter_mass", "p_correct,free", "pearson,mcq~free",
                "alignment_error,mcq~free"):
        name, filt = key.split(",") if "," in key else (key, None)
        suffix = f",{filt}" if filt else ""
        assert res[f"{name}_n{suffix}"] == 6 and len(res[f"{name}_ci{suffix}"]) == 2
        assert res[f"{name}_ci_method{suffix}"] == "bootstrap"
    assert res["acc_ci_method,mcq"] == "wilson" and res["acc,mcq"] == pytest.approx(3 / 6)
    assert res["pearson,mcq~free"] == pytest.approx(np.corrcoef(x, y)[0, 1])
    # the bootstrap of Pearson r resamples question pairs: an independent loop agrees
    idx = np.random.default_rng(0).integers(0, 6, size=(2000, 6))
    with np.errstate(invalid="ignore", divide="ignore"):  # resamples with one distinct x are undefined
        boots = [np.corrcoef(np.take(x, i), np.take(y, i))[0, 1] for i in idx]
    ok = np.array([b for b in boots if np.isfinite(b)])
    assert res["pearson_ci,mcq~free"] == pytest.approx(list(np.quantile(ok, [0.025, 0.975])), abs=1e-9)
    assert res["pearson_undefined_resamples,mcq~free"] == 2000 - ok.size
    text = "\n".join(formats_summary(res, "x"))
    assert "n=6" in text and "[" in text


def test_extraction_rules_and_disagreement(tmp_path):
    assert m.extract_number("9 + 2 = 11") == 9
    assert m.extract_number("9 + 2 = 11", "last-number") == 11
    assert m.extract_number("9 + 2 = 11, or 12", "after-equals") == 11
    assert m.extract_number("9 + 2 = 11, or 12", "last-number") == 12
    assert m.extract_number("no number", "after-equals") is None
    assert m.number_match("4 + 1 = 5", 5, "after-equals") and not m.number_match("4 + 1 = 5", 5)
    res = _fake_run(tmp_path, free=[0.5] * 6, mcq=[0.5] * 6).load_results()
    ex = res["extraction"]
    # free texts "5" and "9 + 2 = 5": paper reads 5 and 9; the others read 5 and 5
    assert ex["paper"]["p_correct,free"] == 0.5 and ex["last-number"]["p_correct,free"] == 1.0
    assert ex["last-number"]["disagree_with_paper,free"] == 0.5 and ex["paper"]["disagree_with_paper,free"] == 0.0
    # free_options "" and "3 = 5": paper None and 3; after-equals None and 5
    assert ex["after-equals"]["disagree_with_paper,free_options"] == 0.5
    with pytest.raises(Exception, match="extraction rule"):
        m.extract_number("1", "nope")


def test_tables_2_3_split_mcq_by_free_by_hand():
    t = m.mcq_by_free_partition([0.1, 0.3, 0.9, 1.0, 0.5], [0.0, 0.6, 0.5, 1.0, 0.2])
    hi, lo = t["partitions"]["free>=0.5"], t["partitions"]["free<0.5"]
    assert hi["n"] == 3 and hi["mean"] == pytest.approx((0.3 + 0.9 + 1.0) / 3)
    assert hi["share"] == pytest.approx([0, 1 / 3, 0, 0, 2 / 3])  # 1.0 falls in the closed last bin
    assert lo["n"] == 2 and lo["share"] == pytest.approx([0.5, 0, 0.5, 0, 0]) and lo["median"] == pytest.approx(0.3)
    assert t["bins"][-1] == "[0.8,1.0]"


# --------------------------------------------------------------------------- TriviaQA


def test_triviaqa_gold_normalised_like_the_generation():
    # the generation "St. Louis" is cut at its "." (004 sec. 2.4.1); so must the gold be
    assert fs.score_free(["St. Louis, Missouri", "Chicago"], ["St. Louis"], "text") == 0.5
    assert m.fraction_correct(["St. Louis"], ["St. Louis"], "text") == 0.0  # the old, gold-untruncated rule


def test_triviaqa_answer_filter_and_seeded_sample(tiny, tmp_path):
    rows = []
    for i in range(40):
        ans = f"answer {i}" if i % 4 else " ".join(["word"] * 20) + f" {i}"
        rows.append({"context": f"Question: trivia question number {i}?\nAnswer:", "answer": ans, "aliases": []})
    path = tmp_path / "tq.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = fs.load_format_items(fs.FormatsConfig(task=f"triviaqa={path}", limit=12, shots=5, n_bins=2), tiny.tokenizer)
    assert "kept 30 of 40" in data.notes["answer_filter"]
    assert len(data.items) == 12 and all("word word" not in it.gold_text for it in data.items)
    first = [f"triviaqa/{i + 1}" for i in range(12)]
    assert [it.id for it in data.items] != first
    assert not {d.id for d in data.demos} & {it.id for it in data.items}
    with pytest.raises(Exception, match="--extract applies"):
        fs.load_format_items(fs.FormatsConfig(task=f"triviaqa={path}", extract="last-number"), tiny.tokenizer)


def test_formats_on_your_own_multiple_choice_file(tiny, tmp_path):
    """mcq=PATH: free generation checked against the gold choice's text (004's normalisation)."""
    rows = [{"id": f"q{i}", "question": f"Which colour is number {i}?", "choices": ["red", "green", "blue", "pale pink"],
             "answer": i % 4, "subject": "colours" if i % 2 else "more colours"} for i in range(24)]
    path = tmp_path / "mc.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = fs.FormatsConfig(model="tiny", task=f"mcq={path}", limit=10, shots=3, n_samples=3, max_new_tokens=4, n_bins=2)
    data = fs.load_format_items(cfg, tiny.tokenizer)
    assert data.answer_type == "text" and len(data.items) == 10 and len(data.demos) == 3
    assert not {d.id for d in data.demos} & {it.id for it in data.items}
    assert fs.answer_of(data.items[0], "text") == [data.items[0].gold_text]
    assert fs.score_free(["Pale pink.", "blue"], ["pale pink"], "text") == 0.5
    folder = fs.run_formats(cfg, tmp_path, run_id="mc", loaded=tiny, show_progress=False)
    res = folder.load_results()
    assert res["n_items"] == 10 and "alignment_error,mcq~free" in res and "mcq_by_free" in res
    samples = list(folder.read_samples())
    for s in samples:  # every free-format score is the share of its generations that match the gold text
        for f in fs.FREE_FORMATS:
            assert s["p_correct"][f] == pytest.approx(np.mean([fs.score_free([g], s["answer"], "text")
                                                               for g in s["generations"][f]]))
    with pytest.raises(Exception, match="--lm-eval-data applies to --task lm-eval:TASK only"):
        fs.load_format_items(fs.FormatsConfig(task=f"mcq={path}", lm_eval_data=str(tmp_path)), tiny.tokenizer)


def test_formats_on_an_lm_eval_multiple_choice_task(tiny, tmp_path):
    """lm-eval:TASK: lm-eval's documents (their question and choice texts) asked in 004's three formats."""
    pytest.importorskip("lm_eval")
    from pathlib import Path

    data_dir = Path(__file__).parents[1] / "fixtures" / "lm_eval_tasks" / "data" / "sciq"
    cfg = fs.FormatsConfig(model="tiny", task="lm-eval:sciq", lm_eval_data=str(data_dir), limit=6, shots=2,
                           n_samples=2, max_new_tokens=4, n_bins=2)
    data = fs.load_format_items(cfg, tiny.tokenizer)
    assert len(data.items) == 6 and all(it.id.startswith("sciq/") for it in data.items + data.demos)
    folder = fs.run_formats(cfg, tmp_path, run_id="sciq", loaded=tiny, show_progress=False)
    assert folder.config["lm_eval_data"] == str(data_dir) and folder.load_results()["n_items"] == 6
    with pytest.raises(Exception, match="scores one context per choice"):
        fs.load_format_items(fs.FormatsConfig(task="lm-eval:winogrande", lm_eval_data=str(data_dir.parent / "winogrande")),
                             tiny.tokenizer)


# --------------------------------------------------------------------------- Fig. 6


def test_compare_runs_for_fig_6(tmp_path):
    from click.testing import CliRunner

    from whitebox_eval.cli import cli

    dirs = []
    for k, shift in enumerate((0.0, 0.1, 0.3)):
        x = [0.1 + shift, 0.9, 0.4, 0.6, 0.2, 0.8]
        dirs.append(_fake_run(tmp_path, free=[0.0, 1.0, 0.5, 0.5, 0.0, 0.5], mcq=x, run_id=f"m{k}").path)
    cmp = compare_runs(dirs)
    xs = [r["p_correct,renorm"] for r in cmp["runs"]]
    ys = [r["alignment_error,mcq~free"] for r in cmp["runs"]]
    assert cmp["pearson"] == pytest.approx(np.corrcoef(xs, ys)[0, 1])
    assert compare_runs(dirs[:2])["pearson_reason"] == "needs >= 3 runs (got 2)"
    other = _fake_run(tmp_path, free=[0.0, 1.0] * 3, mcq=[0.5] * 6, run_id="o", task="arithmetic:add2").path
    with pytest.raises(Exception, match="differ in task"):
        compare_runs([dirs[0], other])
    out = tmp_path / "fig6.png"
    r = CliRunner().invoke(cli, ["formats-compare", *map(str, dirs), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert out.exists() and "pearson r across 3 runs" in r.output


# --------------------------------------------------------------------------- bundled model


SMALL = ["formats", "--model", "smollm2-135m", "--task", "arithmetic:add2,mul2", "--limit", "4", "--n-samples", "3",
         "--max-new-tokens", "6", "--n-bins", "2"]


def _cli(args, tmp_path, run_id, torchrun=False):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}  # one thread everywhere: same bits
    # --standalone: a free rendezvous port (not 29500, which another job may hold); no timeout (load is no failure)
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"] if torchrun else []
    r = subprocess.run([sys.executable, *launcher, "-m", "whitebox_eval", *args, "--output", str(tmp_path),
                        "--run-id", run_id], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


@pytest.mark.integration
def test_bundled_model_samples_identical_for_batch_sizes_and_two_ranks(tmp_path):
    one = _cli([*SMALL, "--batch-size", "1"], tmp_path, "one")
    _cli([*SMALL, "--batch-size", "8"], tmp_path, "eight")
    two = _cli([*SMALL, "--batch-size", "1"], tmp_path, "two", torchrun=True)
    text = (tmp_path / "one" / "samples.jsonl").read_bytes()
    assert (tmp_path / "eight" / "samples.jsonl").read_bytes() == text
    assert (tmp_path / "two" / "samples.jsonl").read_bytes() == text
    assert "rank 1 of 2" in (tmp_path / "two" / "run.log").read_text()
    assert two.stdout.count("run folder:") == 1 and "5-shot" in one.stdout


def test_impossible_settings_are_refused_before_the_model_loads(tmp_path):
    from whitebox_eval.errors import WhiteboxError

    # model "tiny" cannot load: the message proves the check came first
    for bad, msg in ((dict(limit=0), "--limit must be"), (dict(extract="first"), "unknown --extract"),
                     (dict(task="triviaqa=x.jsonl", extract="last-number"), "--extract applies"),
                     (dict(n_samples=0), "--n-samples")):
        with pytest.raises(WhiteboxError, match=msg):
            fs.run_formats(_cfg(**bad), tmp_path)
