"""The --static report in headless Chromium: no injected script runs, hostile text shows
literally, tables and images render, and the console stays silent.

Chromium comes from the ``chromium`` fixture (conftest.py: found on PATH, installed once
with apt-get where allowed, else the test is skipped with the reason printed).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from whitebox_eval.report import write_report

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--enable-logging=stderr", "--v=0"]
CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\]\s*(.*)")


@dataclass
class Page:
    """What Chromium made of a page: the DOM after load and the console messages."""

    dom: str
    console: list[str]


def _run(chromium: str, tmp: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"  # a fresh one each launch
    return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *extra, url],
                          capture_output=True, text=True, timeout=600)  # a guard against a hang, not a limit on load


def load(chromium: str, tmp: Path, page: Path) -> Page:
    """``--dump-dom`` of ``page``, with the console messages Chromium logged meanwhile."""
    done = _run(chromium, tmp, page.resolve().as_uri(), "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    console = [m.group(1) for m in map(CONSOLE.search, done.stderr.splitlines()) if m]
    return Page(done.stdout, console)


def screenshot(chromium: str, tmp: Path, page: Path, out: Path) -> Path:
    """A 1280x1600 screenshot of ``page``."""
    done = _run(chromium, tmp, page.resolve().as_uri(), f"--screenshot={out}", "--window-size=1280,1600",
                "--hide-scrollbars")
    assert done.returncode == 0 and out.is_file(), done.stderr[-2000:]
    return out


def _title(dom: str) -> str:
    match = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert match, dom[:500]
    return match.group(1)


def test_harness_sees_a_script_that_runs(chromium, tmp_path):
    """Control: the checks below do notice a script running and a console error."""
    page = tmp_path / "control.html"
    page.write_text("<!DOCTYPE html><html><head><title>before</title></head><body><p>x</p>"
                    "<script>document.title='pwned';document.body.setAttribute('data-pwned','1');"
                    "console.error('boom')</script></body></html>", encoding="utf-8")
    result = load(chromium, tmp_path, page)
    assert _title(result.dom) == "pwned"
    assert 'data-pwned="1"' in result.dom
    assert any("boom" in line for line in result.console), result.console


def test_report_in_chromium(chromium, mcqa_run, tmp_path):
    run = mcqa_run(n_samples=3)
    page = write_report([run.path], tmp_path / "report.html", static=True)
    result = load(chromium, tmp_path, page)
    dom = result.dom

    # no injected script ran: the title is ours and nothing set data-pwned
    assert _title(dom).startswith("whitebox-eval report: hostile")
    assert "pwned" not in _title(dom) and "data-pwned=" not in dom
    # the hostile text is text: no <script> or extra <img> elements were created
    assert "<script" not in dom.lower()
    assert dom.count("<img ") == 2
    # ...and is shown literally (the DOM serialises text with < > & escaped)
    assert "&lt;script&gt;document.title='pwned';alert(1)&lt;/script&gt;" in dom
    assert "&lt;img src=x onerror=\"document.body.setAttribute('data-pwned','1')\"&gt;" in dom
    assert "fish &amp;amp; chips" in dom
    assert "she said \"hi\" &amp; it's &lt;b&gt;bold&lt;/b&gt;" in dom
    # tables and embedded images are in the rendered page
    assert dom.count("<table") >= 4
    assert len(re.findall(r'<img src="data:image/png;base64,[A-Za-z0-9+/=]+"', dom)) == 2
    # no console output at all: no errors, no blocked loads, no CSP violations
    assert result.console == []


def test_report_screenshot_shows_the_plot(chromium, mcqa_run, tmp_path):
    """The red test heatmap is drawn: many pure-red pixels in the screenshot."""
    import matplotlib.image as mpimg

    page = write_report([mcqa_run().path], tmp_path / "report.html", static=True)
    shot = screenshot(chromium, tmp_path, page, tmp_path / "report.png")
    pixels = mpimg.imread(shot)[..., :3]
    red = (pixels[..., 0] > 0.9) & (pixels[..., 1] < 0.1) & (pixels[..., 2] < 0.1)
    assert red.sum() > 10_000, f"only {red.sum()} red pixels: the embedded PNG did not render"
    if os.environ.get("WHITEBOX_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["WHITEBOX_KEEP_SCREENSHOT"])
