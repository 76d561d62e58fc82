"""k-shot demonstrations are cached on tokens: lm-eval's "\\n\\n"-joined prompts hit the cache.

The tokenizer here merges "\\n\\n" into one token, as SmolLM2's does: the demonstrations'
text alone then ends in that token, while inside a prompt the same characters are two
"\\n" tokens before the next question, so a cache built from the text alone never matches.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from whitebox_eval.internals import Engine
from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa

sys.path.insert(0, str(Path(__file__).parents[1]))
from tiny_models import tiny_llama_with_bpe  # noqa: E402

SUBJECTS = ("astronomy", "marketing")


def _rows(what: str, n: int) -> list[str]:
    return [f"{what} {i} plus {i} in all?,{2 * i},{2 * i + 1},{2 * i + 2},{2 * i + 3},{'ABCD'[i % 4]}" for i in range(n)]


def _mmlu(folder):
    for subject in SUBJECTS:
        for split, what, n in (("test", "What is", 6), ("dev", "Say", 5)):
            (folder / split).mkdir(parents=True, exist_ok=True)
            (folder / split / f"{subject}_{split}.csv").write_text("\n".join(_rows(what, n)) + "\n")
    return folder / "test", folder / "dev"


@pytest.fixture(scope="module")
def newline_model():
    """A tiny llama with a byte-level BPE that has the "\\n\\n" merge."""
    texts = [f"The following are multiple choice questions about {s}.\n\nSay {i} plus {i}?\nA. {i}\nB. {i + 1}\n"
             f"C. {i + 2}\nD. {i + 3}\nAnswer: {'ABCD'[i % 4]}\n\n" for s in SUBJECTS for i in range(40)] * 3
    return tiny_llama_with_bpe(texts, 450)


def test_lm_eval_demonstrations_hit_the_cache_and_score_as_without_it(newline_model, tmp_path, monkeypatch):
    tok = newline_model.tokenizer
    shots = "Say 0 plus 0 in all?\nA. 0\nB. 1\nC. 2\nD. 3\nAnswer: A\n\n"
    alone, inside = tok(shots)["input_ids"], tok(shots + "What")["input_ids"]
    assert tok.convert_ids_to_tokens(alone)[-1] == "ĊĊ" and inside[:len(alone)] != alone  # the text alone misses

    test_dir, dev_dir = _mmlu(tmp_path / "mmlu")
    passes, computed = [], []
    run, prefix = Engine.run, Engine.prefix
    monkeypatch.setattr(Engine, "run", lambda self, batch, *a, **kw: passes.append(kw.get("prefix")) or run(self, batch, *a, **kw))
    monkeypatch.setattr(Engine, "prefix", lambda self, ids: computed.append(list(ids)) or prefix(self, ids))
    base = dict(model="tiny", task=f"mmlu={test_dir}", demos_from=str(dev_dir), prompt="lm-eval", shots=3, batch_size=4,
                min_val_items=4, methods=("baseline", "qk", "attention", "lens", "cloze"))
    on = run_mcqa(MCQAConfig(**base), tmp_path, run_id="on", loaded=newline_model, show_progress=False)
    # 12 items, 6 per subject: the main pass in batches of 4 ([4 | 2 + 2 | 4]); the explorer's rows pass
    # (mcqa/explorer.py), batched as the main pass and reading the same prefixes; the cloze too, each
    # subject's items longest first (a run of shared demonstrations stays in its place)
    assert len(passes) == 3 + 3 + 3
    main, rows, cloze = passes[:3], passes[3:6], passes[6:]
    assert [r.ids for r in rows] == [m.ids for m in main]
    # the batch that mixes two subjects shares their header's first words only
    assert main[1] is not None and tok.decode(main[1].ids).startswith("The following") and "Answer" not in tok.decode(main[1].ids)
    for p, subject in zip((main[0], main[2]), SUBJECTS):  # the demonstrations, as tokenized inside the prompts
        text = tok.decode(p.ids)
        assert text.startswith("The following") and subject in text and text.endswith("Answer: C\n\n")
        assert text.count("Answer:") == 3 and p.ids[-2:] == tok("\n\nWhat")["input_ids"][:2]
        assert sum(c == p.ids for c in computed) == 1  # computed once for the subject
    for k in (0, 2):  # every option's context starts with the subject's demonstrations
        assert cloze[k] is not None and cloze[k].ids[:main[k].length] == main[k].ids
    passes.clear()
    off = run_mcqa(MCQAConfig(**base, prefix_cache=False), tmp_path, run_id="off", loaded=newline_model, show_progress=False)
    assert len(passes) == 9 and not any(passes)
    # float32 passes of other shapes (the prefix computed alone, the suffix reading its keys from the
    # cache): sums of a few hundred terms of size ~1 agree to ~1e-6
    for name in ("letter_logits", "qk", "attention", "lens", "attention_rows"):
        np.testing.assert_allclose(on.load_array(name), off.load_array(name), rtol=1e-4, atol=1e-5, err_msg=name)
    for x, y in zip(on.read_samples(), off.read_samples()):
        np.testing.assert_allclose(x["cloze_loglik"], y["cloze_loglik"], rtol=1e-5, atol=1e-4)  # sums of a few
        np.testing.assert_allclose(x["letter_logits"], y["letter_logits"], atol=2e-5)  # rounded to 5 decimals
        assert x["pred_cloze"] == y["pred_cloze"] and x["pred_baseline"] == y["pred_baseline"]
