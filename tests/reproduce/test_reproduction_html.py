"""reproduction.html draws its figures: every data-plot is in the page (no browser needed),
and headless Chromium renders them with no script run and a silent console."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from test_checks import _claim, _gar, _mcqa, _mui, _span  # noqa: E402
from test_report_browser import load  # noqa: E402


def _report_conftest():
    """The report tests' conftest (its browser finder), loaded under its own name."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "report" / "conftest.py"
    spec = importlib.util.spec_from_file_location("report_browser_conftest", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def chromium() -> str:
    """Path of headless Chromium, found (or installed) as the report's browser tests find it."""
    return _report_conftest()._need(_report_conftest().BROWSERS, "headless Chromium")

from whitebox_eval import power, stats  # noqa: E402
from whitebox_eval.reproduce import HTML_FILE, MARKDOWN_FILE, verdicts, write_outputs  # noqa: E402


def _paper(number: str, short: str, claims: list, figures: list = ()) -> dict:
    for c in claims:
        c.setdefault("verdict_holm", c["verdict"])
    return {"number": number, "short": short, "title": f"paper {number} <b>&</b>", "summary": "", "runs": [],
            "tables": [], "claims": claims, "figures": list(figures), "scaled_down": [], "not_run": []}


@pytest.fixture(scope="module")
def reproduction(tmp_path_factory) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = tmp_path_factory.mktemp("rep")
    png = folder / "runs" / "span-run" / "plots" / "rollout_base_ood_0.png"
    png.parent.mkdir(parents=True)
    plt.imsave(png, np.random.default_rng(0).random((20, 30)))

    gold = [0] * 25 + [1] * 21 + [2] * 20 + [3] * 34
    mmlu = _claim("000", "qk-beats-baseline-mmlu-0shot", *_mcqa(gold, [0] * 4 + [3] * 96, [1] * 100))
    n = 40
    before, after = np.arange(n) < 12, np.arange(n) < 30
    tf = _claim("002", "true-false-intervention-raises", *_gar(after, before, [before.copy()] * 3, before))
    law = {"id": "utility-law", "claim": "MUI falls", "cite": "sec. 3.2", "model": "all", "direction": "less",
           "than": 0.0, "effect_unit": "number", "published": {"effect": -4.632, "b": 28.305},
           "statistic": {"value": -2.0, "lo": -3.0, "hi": -1.0, "b": 20.0, "n": 4, "test": "OLS",
                         "points": [{"label": f"m / t{i}", "performance": 10.0 * (i + 1), "mui": 20 - 2 * i}
                                    for i in range(4)]},
           **verdicts.verdict({"value": -2.0, "lo": -3.0, "hi": -1.0}, "less")}
    mui = _claim("001", "mui-correct-like-incorrect-arithmetic", _mui(0.011, 0.010, 0.0003, 0.002))
    floor = _claim("003", "reinforcement-raises-ood-string-reversal", *_span(0, 0))
    heat = {"kind": "heatmap", "model": "m", "experiment": "mmlu-0shot", "run": "r",
            "matrix": [[0.3, None, 0.1], [0.25, 0.5, 0.2]], "chosen": [1, 1], "chance": 0.25, "source": "x"}
    image = {"kind": "image", "model": "m", "experiment": "string-reversal", "run": "span-run",
             "path": "runs/span-run/plots/rollout_base_ood_0.png"}
    content = {"schema": 2, "scale": "quick", "models": ["m"], "rule": verdicts.RULE, "alpha": stats.ALPHA,
               "power": power.POWER,
               "papers": [_paper("000", "wise-few", [mmlu], [heat]), _paper("001", "mui", [law, mui]),
                          _paper("002", "gar", [tf]), _paper("003", "span", [floor], [image])]}
    write_outputs(folder, content, "whitebox-eval reproduce all --scale quick")
    return folder


PLOTS = ["forest-000", "forest-001", "forest-002", "forest-003", "heatmap-000-m-mmlu-0shot",
         "recall-000-m-qk-beats-baseline-mmlu-0shot", "utility-law", "interventions-002-m",
         "attention-003-m-string-reversal-rollout-base-ood-0"]


def test_every_figure_has_its_data_plot(reproduction):
    page = (reproduction / HTML_FILE).read_text(encoding="utf-8")
    names = re.findall(r'data-plot="([^"]+)"', page)
    assert sorted(names) == sorted(PLOTS)
    assert 'img src="data:image/png;base64,' in page  # 003's map embedded (the CSP allows data: only)
    md = (reproduction / MARKDOWN_FILE).read_text(encoding="utf-8")
    assert "| 000 | raw |" in md and "| all | Holm |" in md  # verdicts counted both ways
    assert "L14H0" in md and "QK head 38.0% (38/100) [uninformed level 34.0%" in md and "vs baseline 21.0% (21/100)" in md
    assert "+17.0 [" in md and "pp n=100" in md  # percentage points
    assert "floor: no item right in any arm" in md


def test_reproduction_html_in_chromium(chromium, reproduction, tmp_path):
    result = load(chromium, tmp_path, reproduction / HTML_FILE)
    dom = result.dom
    for name in PLOTS:
        assert f'data-plot="{name}"' in dom, name
    assert dom.count("<svg") == len(PLOTS) - 1 and dom.count("<img ") == 1
    assert "<script" not in dom.lower() and "paper 000 &lt;b&gt;&amp;&lt;/b&gt;" in dom
    assert dom.count("<circle") >= 4 and dom.count("<rect") >= 6  # the marks are in the rendered DOM
    assert result.console == []
