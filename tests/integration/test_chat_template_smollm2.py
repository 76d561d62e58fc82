"""``mcqa --apply-chat-template`` on the bundled SmolLM2-135M-Instruct: option tokens inside its
template, and lm-eval 0.4.13's own numbers under ``--apply_chat_template`` (frozen by
``benchmarks/lm_eval_chat_template.py``; lm-eval is not needed to run this)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from float_tolerance import loglik_slack  # noqa: E402

from whitebox_eval.internals import Engine  # noqa: E402
from whitebox_eval.mcqa.chat import ChatTemplate  # noqa: E402
from whitebox_eval.mcqa.scoring import score_prompts  # noqa: E402
from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa  # noqa: E402
from whitebox_eval.tasks.prompt_tokens import tokenize_prompt  # noqa: E402
from whitebox_eval.models import load_model  # noqa: E402
from whitebox_eval.tasks.prompts import render_prompt  # noqa: E402
from whitebox_eval.tasks.ssd import make_ssd  # noqa: E402

pytestmark = pytest.mark.integration
FIXTURE = Path(__file__).parents[1] / "fixtures" / "lm_eval_chat_template_arc.json"


@pytest.fixture(scope="module")
def smollm2():
    return load_model("smollm2-135m")


def test_option_tokens_inside_smollm2_template(smollm2):
    tok = smollm2.tokenizer
    items = make_ssd(3, 4, seed=3)
    ct = ChatTemplate(tok)
    plain = render_prompt(items[2], demos=items[:2])
    chat = ct.apply(plain)
    assert chat.text == tok.apply_chat_template([{"role": "user", "content": plain.text}], tokenize=False,
                                                add_generation_prompt=True)
    assert chat.text.startswith(tok.bos_token) and not ct.add_special_tokens(chat.text)  # SmolLM2: BOS is <|im_start|>
    for rep in ("label", "eol", "content_mean"):
        t = tokenize_prompt(tok, chat, rep, ct.add_special_tokens(chat.text))
        assert tok.decode(t.input_ids) == chat.text  # nothing added, nothing lost
        for o, opt in enumerate(chat.options):
            pos = t.option_positions[o]
            if rep == "label":
                assert tok.decode([t.input_ids[pos]]).strip() == chat.labels[o]
            elif rep == "eol":
                assert tok.decode([t.input_ids[pos]]) == "\n"
                nxt = tok.decode(t.input_ids[pos + 1: pos + 3])
                assert nxt.startswith(chat.labels[o + 1] if o + 1 < len(chat.options) else "Answer")
            else:
                assert tok.decode([t.input_ids[i] for i in t.option_tokens[o]]).strip() == opt.content.of(chat.text)
    assert tok.convert_ids_to_tokens(t.input_ids[-4:]) == ["<|im_start|>", "ass", "istant", "Ċ"]
    assert [tok.decode([i]) for i in t.answer_ids] == chat.labels  # "A", not " A"
    # the baseline reads the model's own logits at the last position of the templated prompt
    scores = score_prompts(Engine(smollm2), [t], len(t.option_positions), ["baseline"])
    with torch.no_grad():
        last = smollm2.model(input_ids=torch.tensor([t.input_ids])).logits[0, -1].float()
    np.testing.assert_allclose(scores.letter_logits[0], last[t.answer_ids].numpy(), atol=1e-3)


def test_matches_lm_eval_apply_chat_template_numbers(smollm2, tmp_path):
    frozen = json.loads(FIXTURE.read_text())
    data = tmp_path / "arc.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in frozen["rows"]))
    n = len(frozen["rows"])
    cfg = MCQAConfig(model="smollm2-135m", task=f"arc={data}", limit=n, uncertainty=False, min_val_items=2, batch_size=n,
                     methods=("baseline", "cloze"), apply_chat_template=True)
    folder = run_mcqa(cfg, tmp_path / "runs", run_id="chat", loaded=smollm2, show_progress=False)
    ours = [json.loads(line) for line in (folder.path / "samples.jsonl").read_text().splitlines()]
    letters, cloze = frozen["styles"]["letters"], frozen["styles"]["cloze"]
    assert folder.load_results()["chat_template"]["example_prompt"] == letters[0]["context"]  # the same text, byte for byte
    assert all(d["continuations"] == ["A", "B", "C", "D"] for d in letters)  # no " " delimiter under the template
    for o, c, l in zip(ours, cloze, letters):
        # cloze: log P("\n" + option | templated context) exactly as lm-eval scores it, to the
        # tolerance for another CPU's float32 kernels (tests/float_tolerance.py)
        theirs = np.array(c["loglik"])
        np.testing.assert_array_less(np.abs(np.array(o["cloze_loglik"]) - theirs), loglik_slack(theirs))
        # letters: lm-eval adds log P("\n" | context), the same for every letter; differences agree
        a, b = np.array(o["letter_logits"]), np.array(l["loglik"])
        np.testing.assert_allclose(a - a[0], b - b[0], atol=float(loglik_slack(np.abs(b).max())))
        # the fixture's smallest top-2 gap is 1.3e-3, over twice that tolerance: no near-tie can flip
        assert int(np.argmax(a)) == int(np.argmax(b))
