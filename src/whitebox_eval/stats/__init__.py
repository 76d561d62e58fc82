"""Statistics every suite reports with: intervals, paired tests, controls.

One place (a package of four modules, re-exported here: ``intervals``, ``paired``,
``decisions``, ``results``) so that every headline number in every suite is computed, named
and worded the same way:

- **Intervals.** ``wilson`` for a proportion (accuracy-like metrics, counts of k/n),
  ``clopper_pearson`` where an exact one is wanted; ``bootstrap`` (percentile, over items,
  fixed seed) for a mean of continuous per-item scores -- except when every item sits at 0
  (or every one at 1), where resampling cannot move and Wilson over the items is given
  instead (``wilson_at_bound``): no interval is [0, 0]. All are 95% by default.
- **Paired tests** for "X beats Y on the same items": ``mcnemar`` (exact, two-sided
  binomial on the discordant pairs, with ``mcnemar_interval``, the exact interval that
  agrees with it) for two 0/1 vectors; ``paired_bootstrap`` for two continuous vectors
  (difference of means, percentile interval, two-sided bootstrap p); ``wilcoxon``
  (signed-rank) on per-unit differences.
- **Group tests**: ``permutation_test`` of group labels (difference of a statistic);
  ``clustered_difference`` for tokens nested in sequences (cluster-robust).
- **Families and equivalence**: ``holm`` (adjusted p-values), ``tost`` (two one-sided
  tests against a margin), ``binomial_p`` (exact, against chance).
- **Controls**: ``draws`` summarises random-control draws (mean, sd, every draw).
- **Power** lives in :mod:`whitebox_eval.power` (the smallest effect a test detects).

Results go into ``results.json`` under lm-eval-style keys (``metric,filter``) built by
``add_proportion`` / ``add_mean`` / ``add_paired``: ``acc,qk_head`` keeps the value, and
beside it ``acc_ci,qk_head`` = [lo, hi], ``acc_n,qk_head``, ``acc_stderr,qk_head`` (lm-eval's
sample standard error) and ``acc_ci_method,qk_head`` (``wilson`` or ``bootstrap``).
``verdict`` words a paired test for the CLI summary and the report, so a reader is told
in words when n is too small for the difference claimed.
"""

from whitebox_eval.stats.intervals import (ALPHA, BOOTSTRAP_RESAMPLES, LEVEL, SEED, Estimate, binomial_p, bootstrap,
                                           bootstrap_pairs, clopper_pearson, newcombe, proportion, sample_stderr, wilson)
from whitebox_eval.stats.paired import (PairedTest, against_draws, mcnemar, mcnemar_interval, paired_bootstrap,
                                        permutation_test, wilcoxon)
from whitebox_eval.stats.decisions import Equivalence, clustered_difference, holm, tost
from whitebox_eval.stats.results import (DERIVED_SUFFIXES, Draws, add_difference, add_estimate, add_mean, add_paired,
                                         add_proportion, derived_key, draws, fmt_p, is_derived, split_key, verdict)

__all__ = ["ALPHA", "BOOTSTRAP_RESAMPLES", "LEVEL", "SEED", "Estimate", "binomial_p", "bootstrap", "bootstrap_pairs",
           "clopper_pearson", "newcombe", "proportion", "sample_stderr", "wilson", "PairedTest", "against_draws",
           "mcnemar", "mcnemar_interval", "paired_bootstrap", "permutation_test", "wilcoxon", "Equivalence",
           "clustered_difference", "holm", "tost", "DERIVED_SUFFIXES", "Draws", "add_difference", "add_estimate",
           "add_mean", "add_paired", "add_proportion", "derived_key", "draws", "fmt_p", "is_derived", "split_key",
           "verdict"]
