"""Paper 001: the Model Utilization Index (MUI) and everything built on it.

This package namespace exports the model-independent math only: scores (eq. 2, 13-15),
threshold functions (App. A.4), key sets and MUI (sec. 2.2), the
Utility Law and its corollaries (sec. 3.2-3.7), MUI's interval and the correct-vs-incorrect
test (``mui.statistics``) and plots (SAEs themselves are :mod:`whitebox_eval.sae`). The parts that run a model
on the engine are imported from their modules, so importing this package stays light:

* ``mui.responses``: tasks, prompt formats (App. A.6), greedy responses, correctness;
* ``mui.keyneurons``: teacher-forced scoring of key neurons / SAE features per sample;
* ``mui.study``: a MUI run (run folder, resume, per-sample key sets, subset MUI);
* ``mui.masking``: the masking validation of sec. 3.8;
* ``mui.over_runs``: checkpoint directions (Corollary 1) and the Utility Law over runs;
* ``mui.command``: the ``whitebox-eval mui`` command group.
"""

from whitebox_eval.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "whitebox_eval.mui.statistics": ["correct_vs_incorrect", "jackknife_mui", "threshold_summary"],
    "whitebox_eval.mui.neuron_scores": ["activation_scores", "effective_unembedding", "integrated_gradient_scores", "neuron_contribution_scores", "response_level_scores", "riemann_alphas"],
    "whitebox_eval.mui.thresholds": ["feature_key_mask", "global_topk_mask", "key_mask", "layer_top_fraction_mask", "layer_topk_mask", "top_fraction_k", "top_score_mask"],
    "whitebox_eval.mui.utility_law": ["Direction", "MannWhitneyResult", "RankCorrelation", "RankingAgreement", "UtilityLawFit", "classify_direction", "compare_rankings", "fit_utility_law", "mann_whitney", "performance_utilization_ratio", "rank_correlation", "rank_descending", "ranking_agreement"],
    "whitebox_eval.mui.utilization": ["KeySets", "matched_random_mask", "mui_by_group", "mui_from_masks", "random_subset_mui"],
})
