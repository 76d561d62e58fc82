"""First-token probabilities vs free generation (paper 004): one question asked as an MCQ, in
free text and in free text with the options listed; the study (:mod:`.study`), its sampled
generation (:mod:`.generation`), metrics, plots and the ``formats`` / ``formats-compare`` commands."""

from whitebox_eval.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "whitebox_eval.formats.config": ["FormatsConfig"],
    "whitebox_eval.formats.study": ["run_formats"],
    "whitebox_eval.formats.over_runs": ["compare_runs"],
})
