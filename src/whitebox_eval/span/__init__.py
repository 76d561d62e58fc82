"""AttentionSpan (paper 003): algorithmic tasks with reference attention masks and their scores."""

from whitebox_eval.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "whitebox_eval.span.metrics": ["CorrectErrorComparison", "attention_rollout", "compare_by_position", "compare_clustered", "compare_correct_vs_error", "compare_within_samples", "exact_match_accuracy", "generation_accuracy", "generation_exact", "key_head_scores", "partial_accuracy", "rank_key_heads", "reference_attention_scores", "token_correctness"],
    "whitebox_eval.span.tasks": ["TASKS", "generate", "task_config"],
    "whitebox_eval.span.examples": ["SpanExample"],
    "whitebox_eval.span.tokenization": ["TokenizedExample", "tokenize_example"],
    "whitebox_eval.span.evaluation": ["ExampleScores", "SpanSummary", "evaluate_teacher_forced", "generate_greedy", "generate_greedy_edited", "summarize", "teacher_forced_pass"],
    "whitebox_eval.span.reinforcement": ["KeyHeads", "Reinforcement", "find_key_heads", "reference_cells", "shifted_reference_cells", "sweep_reinforcement"],
    "whitebox_eval.span.config": ["FinetuneConfig", "SpanConfig"],
    "whitebox_eval.span.study": ["run_span"],
})
