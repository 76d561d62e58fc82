"""Tiny stand-ins for the shared samples the benchmark scripts read (``../shared/datasets``
layout, a few synthetic rows each), so the scripts run at micro size on a fresh machine."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

#: the three MMLU subjects of the shared sample (the lm-eval scripts name them)
SUBJECTS = ("high_school_geography", "marketing", "us_foreign_policy")
WORDS = "the city river map trade price market treaty nation border coast law vote plan".split()


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def write_datasets(root: Path, test_rows: int = 6, dev_rows: int = 5, arc_rows: int = 54, hellaswag_rows: int = 44) -> Path:
    """``root``/mmlu/{test,dev}/<subject>_{test,dev}.csv, arc/ (llm-foundry jsonl), hellaswag/
    (the original jsonl) and wikitext2/valid.txt; deterministic. ARC and HellaSwag have a few
    rows more than the 50 and 40 that the lm-eval scripts' k-shot settings take as training rows."""
    rng = random.Random(0)
    for split, n in (("test", test_rows), ("dev", dev_rows)):
        (root / "mmlu" / split).mkdir(parents=True, exist_ok=True)
        for subject in SUBJECTS:
            with (root / "mmlu" / split / f"{subject}_{split}.csv").open("w", newline="", encoding="utf-8") as f:
                w = csv.writer(f)
                for i in range(n):
                    w.writerow([f"Which {_sentence(rng, 5)} {i}?", *(_sentence(rng, 2) for _ in range(4)), "ABCD"[i % 4]])
    (root / "arc").mkdir(parents=True, exist_ok=True)
    with (root / "arc" / "arc_challenge_sample.llmfoundry.jsonl").open("w", encoding="utf-8") as f:
        for i in range(arc_rows):
            f.write(json.dumps({"choices": [_sentence(rng, 3) for _ in range(4)],
                                "query": f"Question: Why {_sentence(rng, 6)} {i}?", "gold": i % 4}) + "\n")
    (root / "hellaswag").mkdir(parents=True, exist_ok=True)
    with (root / "hellaswag" / "hellaswag_val_sample.jsonl").open("w", encoding="utf-8") as f:
        for i in range(hellaswag_rows):
            a, b = _sentence(rng, 8).capitalize() + ".", _sentence(rng, 2)
            f.write(json.dumps({"ind": 100 + i, "activity_label": "Trading", "ctx_a": a, "ctx_b": b, "ctx": f"{a} {b}",
                                "split": "val", "split_type": "indomain", "label": i % 4,
                                "endings": [_sentence(rng, 4) + "." for _ in range(4)],
                                "source_id": f"synthetic~{i}"}) + "\n")
    (root / "wikitext2").mkdir(parents=True, exist_ok=True)
    (root / "wikitext2" / "valid.txt").write_text(
        "\n".join(_sentence(rng, 30) for _ in range(200)) + "\n", encoding="utf-8")
    return root
