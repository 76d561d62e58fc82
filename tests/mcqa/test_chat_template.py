"""``--apply-chat-template``: option-token positions inside the template, no doubled special
tokens, answers without the delimiter (lm-eval 0.4.13), prefix caching."""

from __future__ import annotations

import dataclasses

import json

import numpy as np
import pytest
import torch
import transformers as tf
import yaml
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mcqa.chat import ChatTemplate
from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa
from whitebox_eval.tasks.prompt_tokens import REPRESENTATIVES, tokenize_prompt
from whitebox_eval.models.architectures import Architecture
from whitebox_eval.models.loading import LoadedModel
from whitebox_eval.tasks.prompts import render_prompt
from whitebox_eval.tasks.ssd import make_ssd

SPECIALS = ["<pad>", "<unk>", "<s>", "<|im_start|>", "<|im_end|>"]
#: SmolLM2-like: a default system turn, no BOS in the template
TEMPLATE = ("{% for m in messages %}{% if loop.first and m['role'] != 'system' %}<|im_start|>system\nYou help.<|im_end|>\n"
            "{% endif %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
#: Llama/Gemma-like: the template writes BOS itself
BOS_TEMPLATE = "{{ bos_token }}" + TEMPLATE


@pytest.fixture(scope="module")
def chat_model():
    """A tiny llama whose tokenizer adds BOS by default (like Llama's), with a chat template."""
    texts = [render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)]
    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=420, special_tokens=SPECIALS,
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bos = tk.token_to_id("<s>")
    tk.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False),
                                             processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])])
    tok = tf.PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>", bos_token="<s>",
                                     additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    tok.chat_template = TEMPLATE
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=12, attn_implementation="sdpa")
    model = tf.LlamaForCausalLM(cfg).eval()
    return LoadedModel(model, tok, Architecture.of(model), "tiny-chat", "random")


def _prompts(tok):
    items = make_ssd(3, 4, seed=7)
    plain = render_prompt(items[2], demos=items[:2])
    return plain, ChatTemplate(tok).apply(plain)


def test_every_option_token_points_at_its_own_text_inside_the_template(chat_model):
    tok = chat_model.tokenizer
    plain, chat = _prompts(tok)
    by_hand = tok.apply_chat_template([{"role": "user", "content": plain.text}], tokenize=False, add_generation_prompt=True)
    assert chat.text == by_hand and chat.text.endswith("Answer:<|im_end|>\n<|im_start|>assistant\n")
    assert chat.prefix == by_hand[: by_hand.index(plain.text)] + plain.prefix  # header + demonstrations
    assert chat.answer_cue.of(chat.text) == "Answer:" and chat.question.of(chat.text) == plain.question.of(plain.text)
    ct = ChatTemplate(tok)
    t_plain = tokenize_prompt(tok, plain, "eol")
    for rep in REPRESENTATIVES:
        t = tokenize_prompt(tok, chat, rep, ct.add_special_tokens(chat.text))
        p = tokenize_prompt(tok, plain, rep)
        for o, opt in enumerate(chat.options):
            # the same tokens as in the plain prompt, and the option's own text (decoded)
            assert [tok.decode([t.input_ids[i]]) for i in t.representative_tokens()[o]] == \
                   [tok.decode([p.input_ids[i]]) for i in p.representative_tokens()[o]]
            piece = tok.decode([t.input_ids[t.option_positions[o]]])
            if rep == "label":
                assert piece.strip() == chat.labels[o]
            elif rep == "eol":  # the line break of option o: the next token starts the next line
                assert "\n" in piece
                after = tok.decode(t.input_ids[t.option_positions[o] + 1: t.option_positions[o] + 3])
                assert after.startswith(chat.labels[o + 1] if o + 1 < len(chat.options) else "Answer")
            elif rep == "content_mean":
                assert tok.decode([t.input_ids[i] for i in t.option_tokens[o]]).strip() == opt.content.of(chat.text)
    t = tokenize_prompt(tok, chat, "eol", ct.add_special_tokens(chat.text))
    assert tok.decode(t.input_ids) == "<s>" + chat.text  # one BOS (the tokenizer's), then exactly the templated text
    assert tok.decode(t.input_ids[-1:]) == "\n"  # the last position: the end of the generation prompt
    assert len(t.input_ids) > len(t_plain.input_ids)
    # answers follow the generation prompt without the " " delimiter (lm-eval: target_delimiter "")
    assert chat.answer_strings == list(chat.labels) and [tok.decode([i]) for i in t.answer_ids] == chat.labels


@pytest.mark.parametrize("template", [TEMPLATE, BOS_TEMPLATE])
def test_bos_is_never_added_twice(chat_model, template):
    tok = chat_model.tokenizer
    old = tok.chat_template
    tok.chat_template = template
    try:
        plain, chat = _prompts(tok)
        ct = ChatTemplate(tok)
        t = tokenize_prompt(tok, chat, "eol", ct.add_special_tokens(chat.text))
    finally:
        tok.chat_template = old
    assert t.input_ids.count(tok.bos_token_id) == 1 and t.input_ids[0] == tok.bos_token_id
    assert ct.add_special_tokens(chat.text) == (template == TEMPLATE)  # lm-eval's has_bos_prefix rule


def test_cloze_continuation_is_the_option_without_delimiter_after_the_moved_whitespace(chat_model):
    tok = chat_model.tokenizer
    context, (cont,) = ChatTemplate(tok).cloze("Question: Capital of France?\nAnswer:", ["Paris"])
    full = tok.apply_chat_template([{"role": "user", "content": "Question: Capital of France?\nAnswer:"}], tokenize=False,
                                   add_generation_prompt=True)
    # lm-eval: (ctx, "" + choice), then _encode_pair moves ctx's trailing whitespace into the continuation
    assert context == full[:-1] and cont == "\nParis" and context + cont == full + "Paris"


def test_a_tokenizer_without_template_or_a_template_that_rewrites_the_prompt_is_refused(chat_model):
    tok = chat_model.tokenizer
    old = tok.chat_template
    try:
        tok.chat_template = None
        with pytest.raises(WhiteboxError, match="has no chat template"):
            ChatTemplate(tok)
        tok.chat_template = "{% for m in messages %}{{ m['content'] | upper }}{% endfor %}"
        with pytest.raises(WhiteboxError, match="does not contain the user message verbatim"):
            ChatTemplate(tok).apply(render_prompt(make_ssd(1, 4, seed=0)[0]))
    finally:
        tok.chat_template = old


def test_study_under_the_template_scores_the_templated_text_and_caches_correctly(chat_model, tmp_path):
    cfg = MCQAConfig(model="tiny", shots=2, limit=10, min_val_items=4, batch_size=4, apply_chat_template=True,
                     methods=("baseline", "qk", "attention", "cloze"))
    on = run_mcqa(cfg, tmp_path, run_id="on", loaded=chat_model, show_progress=False)
    off = run_mcqa(dataclasses.replace(cfg, prefix_cache=False), tmp_path, run_id="off", loaded=chat_model,
                   show_progress=False)
    for name in ("letter_logits", "qk", "attention"):  # the cached header + demonstrations give the full passes' scores
        np.testing.assert_allclose(on.load_array(name), off.load_array(name), rtol=1e-4, atol=1e-5)
    conf = yaml.safe_load((on.path / "config.yaml").read_text())
    assert conf["apply_chat_template"] is True and "user message" in conf["chat_template"]["rule"]
    res = on.load_results()
    tok = chat_model.tokenizer
    # the baseline's letter logits are the model's own at the end of the templated prompt (by hand)
    first = json.loads((on.path / "samples.jsonl").read_text().splitlines()[0])  # the first evaluated item
    text = res["chat_template"]["example_prompt"]
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    ids = tok(text)["input_ids"]
    with torch.no_grad():
        last = chat_model.model(input_ids=torch.tensor([ids])).logits[0, -1]
    letters = [tok.convert_tokens_to_ids(x) for x in "ABCDEF"]
    np.testing.assert_allclose(first["letter_logits"], last[letters].numpy(), atol=1e-4)
    # cloze: log P("\n" + option | templated context without its last "\n"), summed, by hand
    pool = {it.id: it for it in make_ssd(10 + 15, 4, seed=0)}
    item = make_ssd(10 + 15, 4, seed=0)[15]  # the first evaluated item (the pool of 15 comes off the front)
    # the cloze shows the demonstrations with their gold text, as lm-eval lays them out
    shots = "".join(f"Question: {pool[i].question}\nAnswer: {pool[i].gold_text}\n\n" for i in conf["demonstrations"]["ids"])
    ctx = tok.apply_chat_template([{"role": "user", "content": shots + f"Question: {item.question}\nAnswer:"}],
                                  tokenize=False, add_generation_prompt=True)
    c_ids = tok(ctx[:-1])["input_ids"]
    want = []
    for o in item.options:
        full = tok(ctx[:-1] + "\n" + o)["input_ids"]
        with torch.no_grad():
            lp = torch.log_softmax(chat_model.model(input_ids=torch.tensor([full])).logits[0].float(), -1)
        want.append(sum(float(lp[i - 1, full[i]]) for i in range(len(c_ids), len(full))))
    assert first["id"] == item.id
    np.testing.assert_allclose(first["cloze_loglik"], want, rtol=1e-4, atol=1e-4)
