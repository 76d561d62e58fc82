"""The MCQA study on a tiny random llama with a real (trained) fast tokenizer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1]))
from whitebox_eval.internals import Engine  # noqa: E402
from whitebox_eval.tasks.prompts import render_prompt  # noqa: E402
from whitebox_eval.mcqa.scoring import score_prompts  # noqa: E402
from whitebox_eval.mcqa.study import MCQAConfig, load_items, run_mcqa  # noqa: E402
from whitebox_eval.tasks.ssd import make_ssd  # noqa: E402
from whitebox_eval.tasks.prompt_tokens import tokenize_prompt  # noqa: E402
from tiny_models import tiny_llama_with_bpe  # noqa: E402


@pytest.fixture(scope="module")
def tiny_mcqa_model():
    texts = [render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)]
    return tiny_llama_with_bpe(texts, 400)


def test_qk_scores_equal_a_hand_computation_from_the_weights(tiny_mcqa_model):
    lm = tiny_mcqa_model
    engine = Engine(lm)
    r = render_prompt(make_ssd(3, 4, seed=5)[0])
    t = tokenize_prompt(lm.tokenizer, r)
    assert lm.tokenizer.decode([t.input_ids[t.option_positions[0]]]).endswith("\n")  # end-of-line token
    scores = score_prompts(engine, [t], len(t.option_positions))
    ids = torch.tensor([t.input_ids])
    with torch.no_grad():
        hs_ = lm.model(input_ids=ids, output_hidden_states=True).hidden_states
    layer, head = 2, 3
    att = lm.model.model.layers[layer].self_attn
    xn = lm.model.model.layers[layer].input_layernorm(hs_[layer][0])
    q = (xn[-1] @ att.q_proj.weight.T).view(4, 12)[head]
    k = (xn[t.option_positions] @ att.k_proj.weight.T).view(-1, 2, 12)[:, head // 2]
    torch.testing.assert_close(torch.from_numpy(scores.qk[0, layer, head]), k @ q, atol=1e-5, rtol=1e-5)
    # baseline letters are the logits of " A".." F" at the last position
    with torch.no_grad():
        last = lm.model(input_ids=ids).logits[0, -1]
    torch.testing.assert_close(torch.from_numpy(scores.letter_logits[0]), last[t.answer_ids], atol=1e-5, rtol=1e-5)


def test_study_writes_results_and_resume_reproduces_them(tiny_mcqa_model, tmp_path):
    cfg = MCQAConfig(model="tiny", limit=24, min_val_items=8, batch_size=4,
                     methods=("baseline", "qk", "attention", "lens", "pride", "pa", "ablation"), ablation_k=2, ablation_draws=2)
    whole = run_mcqa(cfg, tmp_path, run_id="whole", loaded=tiny_mcqa_model, show_progress=False)
    res = whole.load_results()
    assert res["n_items"] == 24 and res["n_val"] == 8 and res["n_test"] == 16
    for key in ("acc,baseline", "acc,qk_head", "acc,attention_head", "pa,baseline", "acc,pride"):
        assert 0.0 <= res["headline"][key] <= 1.0
    assert res["headline"]["pa,baseline"] <= res["headline"]["acc,baseline"]  # PA needs correct twice
    assert len(res["lens_accuracy_per_layer"]) == 3
    assert (whole.path / "plots" / "qk_head_accuracy.png").stat().st_size > 0
    samples = [json.loads(line) for line in (whole.path / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 24 and len(samples[0]["letter_logits"]) == 6
    # PA per item: right on the item and on its permuted copy; the baseline's on every item, the head's on test items
    assert np.mean([s["pa,baseline"] for s in samples]) == res["headline"]["pa,baseline"]
    head = [s["pa,qk_head"] for s in samples if s["split"] == "test"]
    assert len(head) == 16 and np.mean(head) == res["headline"]["pa,qk_head"]
    assert all(s["pa,qk_head"] <= s["acc,qk_head"] for s in samples if "pa,qk_head" in s)
    assert not any("pa,qk_head" in s for s in samples if s["split"] == "validation")
    # interrupt: keep the first two batches of the main pass only, then resume
    cut = run_mcqa(cfg, tmp_path, run_id="cut", loaded=tiny_mcqa_model, show_progress=False)
    lines = (cut.path / "samples.jsonl").read_text().splitlines()
    (cut.path / "samples.jsonl").write_text("\n".join(lines[:8]) + "\n")
    for part in sorted((cut.path / "arrays" / "parts" / "main").glob("*.npz"))[2:]:
        part.unlink()
    for name in ("results.json",):
        (cut.path / name).unlink()
    resumed = run_mcqa(cfg, tmp_path, run_id="cut", resume=True, loaded=tiny_mcqa_model, show_progress=False)
    assert resumed.load_results()["headline"] == res["headline"]
    assert len((resumed.path / "samples.jsonl").read_text().splitlines()) == 24
    np.testing.assert_array_equal(resumed.load_array("qk_head_accuracy"), whole.load_array("qk_head_accuracy"))


def test_prefix_cache_gives_the_same_scores(tiny_mcqa_model, tmp_path):
    base = dict(model="tiny", limit=12, min_val_items=4, batch_size=4, shots=3, methods=("baseline", "qk", "attention"))
    on = run_mcqa(MCQAConfig(**base), tmp_path, run_id="on", loaded=tiny_mcqa_model, show_progress=False)
    off = run_mcqa(MCQAConfig(**base, prefix_cache=False), tmp_path, run_id="off", loaded=tiny_mcqa_model, show_progress=False)
    for name in ("letter_logits", "qk", "attention"):
        np.testing.assert_allclose(on.load_array(name), off.load_array(name), rtol=1e-4, atol=1e-5)


def test_unknown_task_is_a_clear_error():
    from whitebox_eval.errors import WhiteboxError

    with pytest.raises(WhiteboxError, match="unknown task"):
        load_items(MCQAConfig(task="nope"))


def test_formats_study_on_a_tiny_model(tiny_mcqa_model, tmp_path):
    from whitebox_eval.formats.study import FormatsConfig, run_formats
    from whitebox_eval.formats.generation import generate

    cfg = FormatsConfig(model="tiny", task="arithmetic:add1,mul1", limit=6, n_samples=3, max_new_tokens=4, n_bins=2, batch_size=3)
    folder = run_formats(cfg, tmp_path, run_id="f", loaded=tiny_mcqa_model, show_progress=False)
    res = folder.load_results()
    assert res["n_items"] == 6 and set(res["p_correct"]) == {"mcq", "free", "free_options"}
    samples = [json.loads(line) for line in (folder.path / "samples.jsonl").read_text().splitlines()]
    # P(correct) in the MCQ format is the softmax of the letter logits at the gold letter
    engine = Engine(tiny_mcqa_model)
    data = __import__("whitebox_eval.formats.study", fromlist=["x"]).load_format_items(cfg)
    items = {it.id: it for it in data.items}
    s = samples[0]
    r = render_prompt(items[s["id"]], fmt="mcq_plain", demos=data.demos)  # 5-shot by default (004)
    t = tokenize_prompt(tiny_mcqa_model.tokenizer, r)
    logits = score_prompts(engine, [t], len(t.answer_ids), ["baseline"]).letter_logits[0].astype(np.float64)
    p = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    assert s["p_correct"]["mcq"] == pytest.approx(p[s["gold"]], rel=1e-5)
    assert len(s["generations"]["free"]) == 3
    # sampling is seeded: the same call gives the same text
    a = generate(tiny_mcqa_model, ["What is 1 + 1?"], n_samples=2, temperature=1.0, max_new_tokens=4, seed=3)
    b = generate(tiny_mcqa_model, ["What is 1 + 1?"], n_samples=2, temperature=1.0, max_new_tokens=4, seed=3)
    assert a == b


def test_samples_carry_the_chosen_heads_scores(tiny_mcqa_model, tmp_path):
    cfg = MCQAConfig(model="tiny", limit=12, min_val_items=4, batch_size=4, methods=("baseline", "qk", "pride", "cloze"))
    folder = run_mcqa(cfg, tmp_path, run_id="s", loaded=tiny_mcqa_model, show_progress=False)
    res = folder.load_results()
    qk = folder.load_array("qk")
    samples = [json.loads(line) for line in (folder.path / "samples.jsonl").read_text().splitlines()]
    layer, head = res["qk"]["best_head"]
    for i, s in enumerate(samples):
        assert s["qk_head"]["head"] == [layer, head]
        np.testing.assert_allclose(s["qk_head"]["scores"], qk[i, layer, head, :6], rtol=1e-4, atol=1e-4)
        assert len(s["cloze_loglik"]) == 4 and "pred_pride" in s
    assert sum(s["split"] == "validation" for s in samples) == 4


def test_sampling_from_a_shared_prefill_equals_plain_generation(tiny_mcqa_model):
    """n samples reuse one prefill per prompt; greedy decoding shows it changes nothing."""
    from whitebox_eval.formats.generation import generate

    prompts = ["Question: What is 12 + 30?\nAnswer:", "Options:\nA."]
    one = generate(tiny_mcqa_model, prompts, n_samples=1, temperature=0.0, max_new_tokens=6, stop=None)
    many = generate(tiny_mcqa_model, prompts, n_samples=3, temperature=0.0, max_new_tokens=6, stop=None)
    assert many == [[o[0]] * 3 for o in one]


def test_content_mean_representative_averages_keys_and_attention(tiny_mcqa_model):
    """QK with the mean key over an option's content tokens = mean of the per-token QK-scores."""
    lm = tiny_mcqa_model
    engine = Engine(lm)
    item = make_ssd(3, 4, seed=7)[0]
    item.options[1] = "two words here"  # a multi-token option
    r = render_prompt(item)
    t_mean = tokenize_prompt(lm.tokenizer, r, "content_mean")
    groups = t_mean.representative_tokens()
    assert len(groups[1]) > 1
    s_mean = score_prompts(engine, [t_mean], len(groups))
    for o, g in enumerate(groups):  # score each content token alone, then average by hand
        single = tokenize_prompt(lm.tokenizer, r, "eol")
        single.option_positions = list(g)
        single.answer_ids = [single.answer_ids[0]] * len(g)  # letters are not under test here
        s = score_prompts(engine, [single], len(g))
        np.testing.assert_allclose(s_mean.qk[0, :, :, o], s.qk[0].mean(-1), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(s_mean.attention[0, :, :, o], s.attention[0].mean(-1), rtol=1e-4, atol=1e-6)
