"""Character-level tokenization of AttentionSpan examples (paper 003, App. D).

App. D: "with the exclusion of the instruction prompt, we tokenize the few-shot
examples and the data points themselves into single character-level tokens", so that
the reference masks of sec. 3.1 map one-to-one onto token positions. The instruction
(and the optional few-shot header / footer text) is tokenized normally.

Each character gets the id of the single vocabulary entry the model sees for it in the
middle of a text, looked up in the vocabulary rather than by encoding the lone
character (encoding ``"a"`` with a SentencePiece tokenizer gives ``"▁a"``):

* byte-level BPE (GPT-2, Llama 3, Qwen): the byte-to-unicode image of the character's
  UTF-8 bytes (space -> ``Ġ``, newline -> ``Ċ``);
* SentencePiece-style ``Metaspace`` / ``▁`` normalisation (Llama 2, Gemma): space ->
  ``▁``;
* otherwise the character itself, then the byte-fallback token ``<0xNN>``.

A character with no single token raises ``WhiteboxError`` naming it.

Layout: ``[BOS] instruction header demo_1 \\n ... demo_m \\n footer input target [EOS]``.
Target token ``t`` (at ``target_positions[t]``) is predicted from the query row
``prediction_positions[t] = target_positions[t] - 1``; the reference mask row ``t``
lives in that query row, in token coordinates.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from whitebox_eval.span.examples import SpanExample
from whitebox_eval.errors import WhiteboxError

METASPACE = "\u2581"  # '▁'


@lru_cache(maxsize=1)
def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode map used by ByteLevel tokenizers."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


@dataclass(frozen=True)
class _TokenizerKind:
    byte_level: bool
    metaspace: bool


def _tokenizer_kind(tokenizer) -> _TokenizerKind:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return _TokenizerKind(False, False)
    try:
        spec = json.loads(backend.to_str())
    except Exception:  # pragma: no cover - unusual backends
        return _TokenizerKind(False, False)
    parts = json.dumps({k: spec.get(k) for k in ("normalizer", "pre_tokenizer", "decoder")},
                       ensure_ascii=False)
    return _TokenizerKind('"ByteLevel"' in parts, '"Metaspace"' in parts or METASPACE in parts)


def _candidates(char: str, kind: _TokenizerKind) -> list[str]:
    if kind.byte_level:  # the model only ever sees the byte-mapped form
        table = _bytes_to_unicode()
        return ["".join(table[b] for b in char.encode("utf-8"))]
    cands = [METASPACE] if kind.metaspace and char == " " else [char]
    raw = char.encode("utf-8")
    if len(raw) == 1:
        cands.append(f"<0x{raw[0]:02X}>")
    return cands


_VOCAB_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _vocab_and_kind(tokenizer) -> tuple[dict[str, int], _TokenizerKind]:
    """The vocabulary and tokenizer kind, cached per tokenizer object and vocabulary size
    (serialising a 50k-token tokenizer to read its kind costs ~0.5 s per call)."""
    size = len(tokenizer) if hasattr(tokenizer, "__len__") else None
    try:
        cached = _VOCAB_CACHE.get(tokenizer)
    except TypeError:  # not weak-referenceable: no caching
        return tokenizer.get_vocab(), _tokenizer_kind(tokenizer)
    if cached is None or cached[0] != size:
        cached = (size, tokenizer.get_vocab(), _tokenizer_kind(tokenizer))
        _VOCAB_CACHE[tokenizer] = cached
    return cached[1], cached[2]


def character_token_ids(tokenizer, chars: str | Sequence[str]) -> dict[str, int]:
    """Map each distinct character to its single-token id (App. D).

    Raises ``WhiteboxError`` naming the first character the vocabulary cannot hold as a
    single token.
    """
    vocab, kind = _vocab_and_kind(tokenizer)
    out: dict[str, int] = {}
    for char in dict.fromkeys(chars):
        if len(char) != 1:
            raise WhiteboxError(f"expected single characters, got {char!r}")
        for cand in _candidates(char, kind):
            if cand in vocab:
                out[char] = vocab[cand]
                break
        else:
            raise WhiteboxError(
                f"character {char!r} is not a single token of this tokenizer "
                f"({type(tokenizer).__name__}); remove it from the task's character set "
                "or choose a model whose vocabulary has it")
    return out


@dataclass
class TokenizedExample:
    """An example laid out in token coordinates (App. D).

    ``reference_mask[t, j]`` is True when target token ``t`` (predicted at query row
    ``prediction_positions[t]``) should attend to token ``j``; ``valid[t]`` is False for
    rows without a reference (separators, end token), which scores skip.
    ``context_start`` is the first token of the data point itself (after BOS,
    instruction and few-shot prefix); ``prompt_length`` the number of tokens before the
    first target token.
    """

    input_ids: np.ndarray
    input_positions: np.ndarray
    target_positions: np.ndarray
    reference_mask: np.ndarray
    valid: np.ndarray
    context_start: int
    prompt_length: int
    example: SpanExample

    @property
    def prediction_positions(self) -> np.ndarray:
        """Query row whose next-token prediction is each target token."""
        return self.target_positions - 1

    @property
    def target_ids(self) -> np.ndarray:
        return self.input_ids[self.target_positions]

    @property
    def seq_len(self) -> int:
        return int(self.input_ids.shape[0])


def _normal_ids(tokenizer, text: str) -> list[int]:
    if not text:
        return []
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def tokenize_example(example: SpanExample, tokenizer, *, instruction: str = "",
                     few_shot: Sequence[SpanExample | str] = (),
                     few_shot_header: str = "", few_shot_footer: str = "",
                     few_shot_separator: str = "\n", add_bos: bool = True,
                     append_eos: bool = False) -> TokenizedExample:
    """Character-level token layout of ``example`` with its reference mask (App. D).

    ``instruction``, ``few_shot_header`` and ``few_shot_footer`` are tokenized
    normally; few-shot demonstrations (examples or strings) and their separator are
    tokenized one character per token like the data point. ``add_bos`` prepends the
    tokenizer's BOS token when it has one; ``append_eos`` adds its EOS token as a
    final target token with no reference (a row scores skip).
    """
    demo_texts = [d.text if isinstance(d, SpanExample) else str(d) for d in few_shot]
    all_chars = example.text + "".join(demo_texts) + (few_shot_separator if demo_texts else "")
    char_ids = character_token_ids(tokenizer, all_chars)

    ids: list[int] = []
    if add_bos and tokenizer.bos_token_id is not None:
        ids.append(int(tokenizer.bos_token_id))
    ids += _normal_ids(tokenizer, instruction)
    if demo_texts:
        ids += _normal_ids(tokenizer, few_shot_header)
        for demo in demo_texts:
            ids += [char_ids[c] for c in demo + few_shot_separator]
        ids += _normal_ids(tokenizer, few_shot_footer)
    context_start = len(ids)
    ids += [char_ids[c] for c in example.text]
    text_positions = np.arange(context_start, context_start + len(example.text))
    n_in = len(example.input)
    target_positions = text_positions[n_in:]
    if append_eos:
        if tokenizer.eos_token_id is None:
            raise WhiteboxError("append_eos=True but the tokenizer has no EOS token; "
                                "set append_eos=False")
        ids.append(int(tokenizer.eos_token_id))
        target_positions = np.append(target_positions, len(ids) - 1)
    if len(target_positions) and target_positions[0] == 0:
        raise WhiteboxError("the first target token has no token before it to predict it "
                            "from; give the example a non-empty input")

    seq_len = len(ids)
    n_rows = len(target_positions)
    mask = np.zeros((n_rows, seq_len), dtype=bool)
    valid = np.zeros(n_rows, dtype=bool)
    for t, ref in enumerate(example.reference):
        if ref is not None:
            mask[t, text_positions[sorted(ref)]] = True
            valid[t] = True
    return TokenizedExample(
        input_ids=np.asarray(ids, dtype=np.int64),
        input_positions=text_positions[:n_in].copy(),
        target_positions=np.asarray(target_positions, dtype=np.int64),
        reference_mask=mask, valid=valid, context_start=context_start,
        prompt_length=int(target_positions[0]) if n_rows else seq_len,
        example=example)
