"""AttentionSpan (paper 003): algorithmic tasks with reference attention masks and their scores."""

from whitebox_eval.attentionspan.metrics import (
    CorrectErrorComparison,
    attention_rollout,
    compare_correct_vs_error,
    exact_match_accuracy,
    generation_accuracy,
    key_head_scores,
    partial_accuracy,
    rank_key_heads,
    reference_attention_scores,
    token_correctness,
)
from whitebox_eval.attentionspan.tasks import TASKS, SpanExample, generate, task_config
from whitebox_eval.attentionspan.tokenization import TokenizedExample, tokenize_example

__all__ = [
    "TASKS", "CorrectErrorComparison", "SpanExample", "TokenizedExample",
    "attention_rollout", "compare_correct_vs_error", "exact_match_accuracy", "generate",
    "generation_accuracy", "key_head_scores", "partial_accuracy", "rank_key_heads",
    "reference_attention_scores", "task_config", "token_correctness", "tokenize_example",
]
