"""Screenshots of the report's views (docs/explorer/*.png), taken in headless Chromium.

Writes each run's report.html, opens it through Selenium and Debian's chromedriver,
selects an item (for mcqa the first where the baseline is wrong and the attention head
right), clicks what a view needs, and saves each ``[data-view]`` element as a PNG named
``<name>-<view>.png``. With two runs after ``--compare`` it also shows them side by side.

    python benchmarks/explorer_screenshots.py --out docs/explorer mcqa=runs/<mcqa run> gar=runs/<gar run> ...
    python benchmarks/explorer_screenshots.py --out docs/explorer --compare runs/<A> runs/<B>
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import Select

from whitebox_eval.report import write_report


def driver() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,1400",
                 "--hide-scrollbars"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def pick(run: Path) -> str | None:
    """The mcqa item to show: baseline wrong and the attention head right (else the first)."""
    lines = [json.loads(x) for x in (run / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    for s in lines:
        head = s.get("attention_head") or {}
        if "pred_baseline" in s and s["pred_baseline"] != s["gold"] and head.get("pred") == s["gold"] and not head.get("tied"):
            return s["id"]
    return None


def save_views(d: webdriver.Chrome, out: Path, name: str) -> list[Path]:
    saved = []
    for element in d.find_elements("css selector", "[data-view]"):
        view = element.get_attribute("data-view")
        d.execute_script("arguments[0].scrollIntoView()", element)
        path = out / f"{name}-{view}.png"
        element.screenshot(str(path))
        saved.append(path)
    return saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="NAME=RUN_FOLDER (or, with --compare, run folders)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--compare", action="store_true", help="one page of the given runs side by side")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    d = driver()
    tmp = Path(tempfile.mkdtemp())
    try:
        if args.compare:
            page = write_report([Path(r) for r in args.runs], tmp / "compare.html")
            d.get(page.resolve().as_uri())
            element = d.find_element("css selector", "[data-view=compare]")
            options = Select(element.find_element("css selector", "select")).options
            Select(element.find_element("css selector", "select")).select_by_index(min(3, len(options) - 1))
            d.execute_script("arguments[0].scrollIntoView()", element)
            element.screenshot(str(args.out / "compare.png"))
            print(args.out / "compare.png")
            return
        for spec in args.runs:
            name, run = spec.split("=", 1)
            run = Path(run)
            page = write_report([run], tmp / f"{name}.html")
            d.get(page.resolve().as_uri())
            wanted = pick(run)
            rows = d.find_elements("css selector", "[data-view=items] tbody tr")
            if wanted:
                Select(d.find_element("css selector", "[data-filter='baseline']")).select_by_value("incorrect")
                Select(d.find_element("css selector", "[data-filter='attention head']")).select_by_value("correct")
                rows = [r for r in d.find_elements("css selector", "[data-view=items] tbody tr")
                        if r.find_element("css selector", "td.id").text == wanted]
            rows[min(1, len(rows) - 1) if not wanted else 0].click()
            tokens = d.find_elements("css selector", "[data-view=neurons] .tok[data-token]")
            if tokens:
                tokens[0].click()
            for path in save_views(d, args.out, name):
                print(path)
    finally:
        d.quit()


if __name__ == "__main__":
    main()
