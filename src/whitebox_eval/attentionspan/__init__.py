"""AttentionSpan (paper 003): algorithmic tasks with reference attention masks and their scores."""

from whitebox_eval.attentionspan.metrics import (
    CorrectErrorComparison,
    attention_rollout,
    compare_by_position,
    compare_correct_vs_error,
    compare_within_samples,
    exact_match_accuracy,
    generation_accuracy,
    generation_exact,
    key_head_scores,
    partial_accuracy,
    rank_key_heads,
    reference_attention_scores,
    token_correctness,
)
from whitebox_eval.attentionspan.tasks import TASKS, SpanExample, generate, task_config
from whitebox_eval.attentionspan.tokenization import TokenizedExample, tokenize_example
from whitebox_eval.attentionspan.evaluation import (
    ExampleScores,
    SpanSummary,
    evaluate_teacher_forced,
    generate_greedy,
    generate_greedy_edited,
    summarize,
    teacher_forced_pass,
)
from whitebox_eval.attentionspan.reinforcement import (
    KeyHeads,
    Reinforcement,
    find_key_heads,
    control_band,
    random_heads,
    reference_cells,
    shifted_reference_cells,
    sweep_reinforcement,
)
from whitebox_eval.attentionspan.finetune import FinetuneConfig, finetune, load_checkpoint_weights, save_checkpoint
from whitebox_eval.attentionspan.study import SpanConfig, run_span

__all__ = [
    "TASKS", "CorrectErrorComparison", "compare_by_position", "compare_within_samples",
    "generation_exact", "control_band", "shifted_reference_cells", "SpanExample", "TokenizedExample",
    "attention_rollout", "compare_correct_vs_error", "exact_match_accuracy", "generate",
    "generation_accuracy", "key_head_scores", "partial_accuracy", "rank_key_heads",
    "reference_attention_scores", "task_config", "token_correctness", "tokenize_example",
    "ExampleScores", "SpanSummary", "evaluate_teacher_forced", "generate_greedy",
    "generate_greedy_edited", "summarize", "teacher_forced_pass", "KeyHeads", "Reinforcement",
    "find_key_heads", "random_heads", "reference_cells", "sweep_reinforcement", "FinetuneConfig",
    "finetune", "load_checkpoint_weights", "save_checkpoint", "SpanConfig", "run_span",
]
