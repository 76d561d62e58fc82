"""Fake run folders for the report tests, written with the real RunFolder, and the browser.

The MCQA fake carries hostile text (script tags, an ``onerror`` image, ``&amp;`` and
quotes) in its prompt, options, config and results, so escaping is tested everywhere
the page shows run text.

The browser is Debian's ``chromium`` (with ``chromium-driver`` for the clicking tests,
driven by Selenium from the ``test`` extra). When one is missing the tests install both
once with ``apt-get`` if they run as root and ``CI=true`` or ``WHITEBOX_INSTALL_BROWSER=1``
is set; otherwise, or when the install fails, they are skipped with the reason printed.
Nothing is downloaded by Selenium: the driver and browser paths are given.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from whitebox_eval import stats  # noqa: E402
from whitebox_eval.mui.study import moves_declaration  # noqa: E402
from whitebox_eval.runs import RunFolder  # noqa: E402

SCRIPT = "<script>document.title='pwned';alert(1)</script>"
IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"
AMP = "fish &amp; chips"
QUOTES = "she said \"hi\" & it's <b>bold</b>"
HOSTILE = (SCRIPT, IMG, AMP, QUOTES)


def save_plot(folder: RunFolder, name: str, red: bool = False) -> Path:
    """A small PNG made with matplotlib (Agg); ``red`` fills it with pure red."""
    fig, ax = plt.subplots(figsize=(4, 3), dpi=50)
    if red:
        fig.patch.set_facecolor((1.0, 0.0, 0.0))
        ax.set_facecolor((1.0, 0.0, 0.0))
        ax.set_axis_off()
    else:
        ax.imshow(np.arange(12).reshape(3, 4))
        ax.set_title(name)
    path = folder.plot_path(name)
    fig.savefig(path, facecolor=fig.get_facecolor())
    plt.close(fig)
    return path


def make_mcqa_run(root: Path, run_id: str = "hostile", n_samples: int = 3,
                  headline: dict[str, Any] | None = None) -> RunFolder:
    """An MCQA-like run whose config, results and samples hold hostile text."""
    folder = RunFolder.create(root, {
        "suite": "mcqa", "model": f"tiny {QUOTES}", "task": f"ssd {SCRIPT}", "seed": 0,
        "note": AMP, "methods": ["baseline", IMG]}, run_id=run_id)
    labels = ["A", "B", "C", "D"]
    records = []
    for i in range(n_samples):
        records.append({
            "id": f"item-{i}-{SCRIPT}", "gold": 3, "labels": labels,
            "prompt": f"Question {i}: {SCRIPT} {IMG} {AMP} {QUOTES}",
            "options": [SCRIPT, IMG, AMP, QUOTES],
            "letter_logits": [1.0, 2.0, 0.5, 3.0], "pred_baseline": 3,
            "qk_head": {"head": [3, 1], "scores": [0.1, 0.7, 0.1, 0.1], "pred": 1},
            "attention_head": {"head": [2, 0], "scores": [0.2, 0.1, 0.1, 0.6], "pred": 3},
            "split": "test", "extra": QUOTES})
    folder.append_samples(records)
    folder.save_results({
        "headline": headline or {"acc,baseline": 0.75, "acc,qk_head": 0.5},
        "zz_first_sorted": 1.0, "qk": {"best_head": [3, 1], "label": SCRIPT},
        "lens_accuracy_per_layer": [0.1] * 30})
    folder.save_array("qk", np.zeros((5, 4, 2, 4), dtype=np.float32))
    save_plot(folder, "qk_head_accuracy", red=True)
    save_plot(folder, "prediction_distribution")
    return folder


def make_mui_run(root: Path, run_id: str, task: str, accuracy: float, mui: float) -> RunFolder:
    """A finished MUI run reduced to what the report reads: accuracy and MUI (fractions) with
    intervals over 10 items, and the suite's own ``moves`` declaration."""
    folder = RunFolder.create(root, {"suite": "mui", "model": run_id, "task": task}, run_id=run_id)
    folder.append_samples([{"id": "a", "gold": "B", "response": "B. yes", "correct": True}])
    head: dict = {}
    stats.add_estimate(head, "accuracy", stats.Estimate(accuracy, max(0.0, accuracy - 0.25),
                                                        min(1.0, accuracy + 0.25), 10, "wilson", 0.1))
    stats.add_estimate(head, "mui", stats.Estimate(mui, mui / 2, 2 * mui, 10, "jackknife", mui / 4))
    folder.save_results({**head, "n_items": 10, "moves": moves_declaration(), "headline": head})
    save_plot(folder, "layer_utilization")
    return folder


def make_old_mui_run(root: Path, run_id: str = "old") -> RunFolder:
    """A MUI run as results.json was written before the estimates contract: percent values,
    ``*_ci_percent`` beside them in the headline, no ``moves``."""
    folder = RunFolder.create(root, {"suite": "mui", "model": run_id, "task": "ssd"}, run_id=run_id)
    folder.append_samples([{"id": "a", "gold": "B", "response": "B. yes", "correct": True}])
    folder.save_results({
        "n_items": 8, "accuracy": 0.125, "accuracy_ci": [0.0224, 0.4709], "accuracy_n": 8,
        "accuracy_stderr": 0.125, "accuracy_ci_method": "wilson", "accuracy_percent": 12.5, "mui_percent": 0.2279,
        "mui": 0.002279, "mui_ci": [0.002022, 0.002535], "mui_n": 8, "mui_ci_method": "jackknife",
        "mui_correct_percent": 0.0651, "by_group": {"add1": {"n": 1, "accuracy_percent": 100.0,
                                                             "accuracy_ci_percent": [20.65, 100.0]}},
        "headline": {"accuracy_percent": 12.5, "accuracy_ci_percent": [2.24, 47.09], "mui_percent": 0.2279,
                     "mui_ci_percent": [0.2022, 0.2535], "n": 8}})
    return folder


@pytest.fixture
def mcqa_run(tmp_path: Path) -> Callable[..., RunFolder]:
    """Factory: ``mcqa_run(run_id=..., n_samples=..., headline=...)`` under tmp_path/runs."""
    return lambda **kw: make_mcqa_run(tmp_path / "runs", **kw)


@pytest.fixture
def mui_run(tmp_path: Path) -> Callable[..., RunFolder]:
    """Factory: ``mui_run(run_id, task, accuracy, mui)`` (fractions) under tmp_path/runs."""
    return lambda *a, **kw: make_mui_run(tmp_path / "runs", *a, **kw)


@pytest.fixture
def old_mui_run(tmp_path: Path) -> Callable[..., RunFolder]:
    """Factory: ``old_mui_run(run_id)``, a MUI run in the older percent layout, under tmp_path/runs."""
    return lambda *a, **kw: make_old_mui_run(tmp_path / "runs", *a, **kw)


@pytest.fixture
def payloads() -> dict[str, str]:
    """The hostile strings the fake MCQA run carries, by name."""
    return {"script": SCRIPT, "img": IMG, "amp": AMP, "quotes": QUOTES}


@pytest.fixture
def make_plot() -> Callable[..., Path]:
    """``make_plot(folder, name, red=False)``: a small matplotlib PNG in the run's plots/."""
    return save_plot


# ---------------------------------------------------------------------- the browser

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
DRIVERS = ("chromedriver",)
_INSTALL_OUTCOME: list[str] = []
"""Why the one install attempt of this session did not give a browser (empty: not tried)."""


def _find(names: tuple[str, ...]) -> str | None:
    return next((path for path in map(shutil.which, names) if path), None)


def _install_browser() -> str:
    """Try ``apt-get install -y chromium chromium-driver`` once; return why it was not done or failed."""
    wanted = os.environ.get("CI", "").lower() == "true" or os.environ.get("WHITEBOX_INSTALL_BROWSER") == "1"
    if not wanted:
        return "set WHITEBOX_INSTALL_BROWSER=1 (or CI=true) to let the test apt-get install chromium chromium-driver"
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "installing chromium needs root (apt-get install -y chromium chromium-driver)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium", "chromium-driver"]):
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"`{' '.join(command)}` failed: {exc}"
        if done.returncode != 0:
            return f"`{' '.join(command)}` failed: {done.stderr.strip()[-300:]}"
    return ""


def _skip(reason: str) -> None:
    print(f"SKIPPED browser test: {reason}", file=sys.stderr)
    pytest.skip(reason)


def _need(names: tuple[str, ...], what: str) -> str:
    path = _find(names)
    if path is None:
        if not _INSTALL_OUTCOME:  # try the install once per session, whatever the scope
            _INSTALL_OUTCOME.append(_install_browser())
        path = _find(names)
        if path is None:
            _skip(f"{what} not available: {_INSTALL_OUTCOME[0] or 'installed, but not found on PATH'}")
    return path


@pytest.fixture(scope="session")
def chromium() -> str:
    """Path of a Chromium binary, installed once if allowed; skips (printing why) otherwise."""
    return _need(BROWSERS, "headless Chromium")


@pytest.fixture(scope="session")
def browser(chromium):
    """A headless Chromium driven by Selenium through Debian's chromedriver (one per session)."""
    driver_path = _need(DRIVERS, "chromedriver (Debian package chromium-driver)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _skip("selenium is not installed (pip install -e '.[test]')")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-extensions", "--window-size=1280,1600"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()
