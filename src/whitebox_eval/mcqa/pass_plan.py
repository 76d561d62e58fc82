"""The passes an mcqa study runs for its settings, stated up front (:mod:`whitebox_eval.runs.pass_plan`):
progress then says ``pass k of N`` with the study's time left."""

from __future__ import annotations


def pass_plan(study) -> list[tuple[str, int]]:
    """The passes ``finalize`` runs for these settings, in its order, with their items: main, the
    explorer's rows, the permuted copies (pa), PriDe's shifts of the validation items, the
    ablations (key heads, then each random draw, on the test items), the cloze."""
    from whitebox_eval.mcqa.ablation import KEY_PASS, RANDOM_PASS

    cfg, n, methods = study.cfg, len(study.items), set(study.cfg.methods)
    test = len(study.split.test)
    plan = [("main", n if study.letters else 0),
            ("rows", n if cfg.item_views and methods & {"qk", "attention"} else 0),
            ("perm", n if "pa" in methods else 0),
            ("pride", sum(len(study.items[i].options) for i in study.split.val) if "pride" in methods else 0)]
    if "ablation" in methods and "qk" in methods:
        plan += [(KEY_PASS, test)] + [(f"{RANDOM_PASS}{d}", test) for d in range(cfg.ablation_draws)]
    return plan + [("cloze", n if "cloze" in methods else 0)]
