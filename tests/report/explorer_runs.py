"""Real run folders of every suite on tiny random models, for the explorer's browser tests.

Each function runs the suite's own study (the code that writes samples.jsonl and arrays/)
with a tiny model and a small limit, and returns the run folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import transformers as tf
from tokenizers import Regex, Tokenizer, models, pre_tokenizers

from whitebox_eval.models.architectures import Architecture
from whitebox_eval.models.loading import LoadedModel
from whitebox_eval.runs import RunFolder

sys.path.insert(0, str(Path(__file__).parents[1]))
from tiny_models import tiny_formats_llama, tiny_llama_with_bpe  # noqa: E402


def _llama(tokenizer, layers: int = 3, seed: int = 0, std: float = 0.3) -> LoadedModel:
    torch.manual_seed(seed)
    cfg = tf.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=48, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=512,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=tokenizer.bos_token_id, attn_implementation="sdpa")
    model = tf.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" not in name:
                p.normal_(0, std)
    return LoadedModel(model, tokenizer, Architecture.of(model), "tiny-llama", "random")


def mcqa(root: Path, run_id: str = "mcqa", limit: int = 60, seed: int = 0) -> RunFolder:
    """An SSD study (baseline, QK, Attention, lens) on a tiny llama with a trained BPE."""
    from whitebox_eval.mcqa.study import MCQAConfig, run_mcqa
    from whitebox_eval.tasks.prompts import render_prompt
    from whitebox_eval.tasks.ssd import make_ssd

    texts = [render_prompt(it).text + " A B C D E F" for it in make_ssd(300, 4, seed=1)]
    lm = tiny_llama_with_bpe(texts, 400)
    if seed:
        with torch.no_grad():
            torch.manual_seed(seed)
            for p in lm.model.parameters():
                p.add_(0.05 * torch.randn_like(p))
    cfg = MCQAConfig(model=f"tiny-{seed}", limit=limit, min_val_items=10, batch_size=8,
                     methods=("baseline", "qk", "attention", "lens"))
    return run_mcqa(cfg, root, run_id=run_id, loaded=lm, show_progress=False)


def span(root: Path) -> RunFolder:
    """String reversal with rollout kept for the first two examples per stage."""
    from whitebox_eval.span.study import SpanConfig, run_span

    vocab = {"<s>": 0, "</s>": 1, "<unk>": 2}
    for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 =+*\n.,:":
        vocab[c] = len(vocab)
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex("(?m)."), behavior="isolated")
    tok = tf.PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                     pad_token="</s>")
    cfg = SpanConfig(model="tiny", task="string_reversal", split="both", limit=4, id_params={"length": (2, 4)},
                     ood_params={"length": (5, 6)}, instruction="R:", rollout=True, heatmaps=2, batch_size=2)
    return run_span(cfg, root, run_id="span", loaded=_llama(tok), show_progress=False)


def formats(root: Path) -> RunFolder:
    """Paper 004's formats study on arithmetic items."""
    from whitebox_eval.formats import study as fs

    cfg = fs.FormatsConfig(model="tiny", task="arithmetic:add1,add2,mul1", limit=6, n_samples=3, max_new_tokens=5,
                           n_bins=2)
    return fs.run_formats(cfg, root, run_id="formats", loaded=tiny_formats_llama(), show_progress=False)


def mui_sae(root: Path) -> RunFolder:
    """MUI scored on a tiny TopK SAE's features (``--score sae``) at block 1."""
    from whitebox_eval.mui.study import MUIConfig, run_mui
    from mui.mui_testing import save_tiny_sae, tiny_lm

    lm = tiny_lm("llama")
    save_tiny_sae(lm, root / "sae")
    cfg = MUIConfig(model="tiny", task="arithmetic-gen:add1,mul1", limit=6, batch_size=3, max_new_tokens=6,
                    score="sae", sae=(str(root / "sae"),), threshold="topk", threshold_value=3)
    return run_mui(cfg, root, run_id="mui", loaded=lm, show_progress=False)


def gar_intervene(root: Path, tokenizer) -> RunFolder:
    """Strong / weak / knock-out interventions on two heads of a tiny llama (SmolLM2's tokenizer)."""
    from whitebox_eval.gar.intervene_study import GARInterveneConfig, run_gar_intervene

    lm = _llama(tokenizer, layers=2)
    cfg = GARInterveneConfig(model="tiny", tasks="truth", limit=2, heads="1.0,1.1", batch_size=4)
    return run_gar_intervene(cfg, root, run_id="gar", loaded=lm, show_progress=False)
