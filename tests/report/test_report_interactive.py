"""The interactive page as text: one script allowed by hash, the data as inert JSON, hostile text never markup."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser

from whitebox_eval.report import write_report


class _Scripts(HTMLParser):
    """Each <script> element's attributes and text, as a browser's parser splits them."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=False)
        self.scripts: list[tuple[dict, str]] = []
        self._open: dict | None = None
        self.handlers: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.handlers += [k for k, _ in attrs if k.startswith("on")]
        if tag == "script":
            self._open = dict(attrs)
            self.scripts.append((self._open, ""))

    def handle_data(self, data):
        if self._open is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag):
        if tag == "script":
            self._open = None


def test_one_hashed_script_and_inert_data(mcqa_run, payloads, tmp_path):
    run = mcqa_run(n_samples=4)
    html = write_report([run.path], tmp_path / "r.html").read_text(encoding="utf-8")
    parsed = _Scripts(html)
    assert not parsed.handlers
    (data_attrs, data), (code_attrs, code) = parsed.scripts  # exactly two script elements
    assert data_attrs == {"type": "application/json", "id": "wb-data"} and code_attrs == {}
    digest = base64.b64encode(hashlib.sha256(code.encode("utf-8")).digest()).decode("ascii")
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html).group(1)
    assert f"script-src &#x27;sha256-{digest}&#x27;" in csp and "default-src &#x27;none&#x27;" in csp
    assert "http://" not in html and "https://" not in html
    for raw in payloads.values():
        assert raw not in html  # nowhere in the page raw, the data block included
    assert not re.search(r"[<>]", data)  # nothing in the data can close or open an element
    page = json.loads(data)
    (entry,) = page["runs"]
    assert entry["suite"] == "mcqa" and [it["id"] for it in entry["items"]] == [f"item-{i}-{payloads['script']}" for i in range(4)]
    item = entry["items"][0]  # the hostile text comes back exactly as the run holds it
    assert payloads["script"] in item["text"] and payloads["img"] in item["text"]
    assert item["pred"] == {"baseline": "D", "qk head": "B", "attention head": "D"}
    assert item["ok"] == {"baseline": True, "qk head": False, "attention head": True}
    # the script writes data as text or attribute values only
    assert "innerHTML" not in code and "insertAdjacentHTML" not in code and "document.write" not in code
    assert "eval(" not in code and "new Function" not in code


def test_static_page_keeps_todays_viewer(mcqa_run, tmp_path):
    run = mcqa_run(n_samples=3)
    html = write_report([run.path], tmp_path / "r.html", static=True).read_text(encoding="utf-8")
    assert "<script" not in html and html.count("<details class=sample>") == 3
    assert "script-src" not in html


def test_a_run_made_before_rows_were_kept_shows_what_its_arrays_allow(tmp_path):
    import sys
    from pathlib import Path

    import numpy as np

    from whitebox_eval.report.explorer_views import page_data
    from whitebox_eval.report.rundata import load_run

    sys.path.insert(0, str(Path(__file__).parent))
    import explorer_runs

    run = explorer_runs.mcqa(tmp_path, limit=20)
    for name in ("attention_rows", "attention_rows_offsets", "attention_rows_before"):
        (run.path / "arrays" / f"{name}.npy").unlink()
    results = run.load_results()
    del results["explorer"]
    run.save_results(results)
    (entry,) = page_data([load_run(run.path)])["runs"]
    chosen = [results["attention"]["best_head"], results["qk"]["best_head"]]
    assert entry["heads"] == [h for k, h in enumerate(chosen) if h not in chosen[:k]] and not entry["rows_kept"]
    attention = np.load(run.path / "arrays" / "attention.npy")
    for item, s in zip(entry["items"], run.read_samples()):
        view = item["mcqa"]
        assert "rows" not in view and "tokens" not in view
        (layer, head) = entry["heads"][0]
        np.testing.assert_allclose(view["attention"][0], attention[s["doc_id"], layer, head, :len(s["labels"])], rtol=1e-3)
        assert len(view["lens"]) == 3
