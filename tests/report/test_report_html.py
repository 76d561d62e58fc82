"""report.html: escaped text only, embedded images, no network, sections, several runs."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.report import write_report
from whitebox_eval.report.samples import scorers_of
from whitebox_eval.runs import RunFolder

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class _Elements(HTMLParser):
    """The elements a browser's parser would make: (tag, attributes) in document order."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def attribute(self, name: str) -> list[str]:
        return [a[name] or "" for _, a in self.elements if name in a]


def _text_between(html: str, start: str, end: str) -> str:
    i = html.index(start)
    return html[i:html.index(end, i)]


def test_hostile_text_appears_only_escaped(mcqa_run, payloads, tmp_path):
    run = mcqa_run()
    html = write_report([run.path], tmp_path / "r.html", static=True).read_text(encoding="utf-8")
    lowered = html.lower()
    assert "<script" not in lowered  # the page has no script at all, injected or own
    for raw in payloads.values():
        assert raw not in html
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&quot;document.body.setAttribute(&#x27;data-pwned&#x27;" in html
    assert "fish &amp;amp; chips" in html  # the entity in the data shows as typed
    assert "she said &quot;hi&quot; &amp; it&#x27;s &lt;b&gt;bold&lt;/b&gt;" in html
    # config (model, task, list items), results and sample ids are escaped too
    assert "tiny she said &quot;hi&quot;" in html
    assert "ssd &lt;script&gt;" in html
    assert "item-0-&lt;script&gt;" in html
    # the only elements are the page's own, and none has an event handler
    elements = _Elements(html).elements
    assert not [a for _, a in elements if any(k.startswith("on") for k in a)]
    tags = {tag for tag, _ in elements}
    assert tags <= {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3",
                    "p", "ul", "ol", "li", "a", "section", "table", "thead", "tbody", "tr", "th",
                    "td", "details", "summary", "div", "span", "b", "pre", "figure", "img",
                    "figcaption"}, tags


def test_images_are_data_uris_and_nothing_is_fetched(mcqa_run, tmp_path):
    run = mcqa_run()
    html = write_report([run.path], tmp_path / "r.html").read_text(encoding="utf-8")
    assert "http://" not in html and "https://" not in html
    parsed = _Elements(html)
    srcs = parsed.attribute("src")
    assert len(srcs) == len(list((run.path / "plots").glob("*.png"))) == 2
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG_SIGNATURE)
    hrefs = parsed.attribute("href")
    assert hrefs and all(h.startswith("#") for h in hrefs)
    for href in hrefs:  # every in-page link has its target
        assert href[1:] in parsed.attribute("id")
    assert "Content-Security-Policy" in html and "default-src &#x27;none&#x27;" in html
    assert not re.search(r"<link|@import|url\(", html)


def test_sections_headline_first_heatmaps_and_samples(mcqa_run, tmp_path):
    run = mcqa_run(n_samples=205)
    html = write_report([run.path], tmp_path / "r.html", sample_cap=200, static=True).read_text(encoding="utf-8")
    metrics = _text_between(html, "<h3>Summary metrics</h3>", "</details>")
    assert metrics.index("acc,baseline") < metrics.index("acc,qk_head") < metrics.index("lens_accuracy_per_layer")
    assert metrics.index("acc,qk_head") < metrics.index("zz_first_sorted")  # headline before the rest
    assert "qk.best_head" in metrics and "[3, 1]" in metrics
    heatmaps = _text_between(html, "<h3>Per-head heatmaps</h3>", "</div>")
    assert "qk_head_accuracy.png" in heatmaps and "prediction_distribution" not in heatmaps
    assert "prediction_distribution.png" in _text_between(html, "<h3>Plots</h3>", "</div>")
    assert html.count("<details class=sample>") == 200
    assert "Showing the first 200 of 205 samples" in html
    sample = _text_between(html, "<details class=sample>", "</details>")
    assert "gold: D" in sample and "qk head L3H1: B" in sample and "attention head L2H0: D" in sample
    assert "<span class='bad'>qk head L3H1: B</span>" in sample
    assert "<span class='ok'>baseline: D</span>" in sample
    assert "<td class='pred gold'>3</td>" in sample  # baseline's logit for D, picked and gold
    assert "D (3)" in sample
    assert "<th>extra</th>" in sample  # fields the viewer does not know are listed
    assert "qk</th><td>5 \u00d7 4 \u00d7 2 \u00d7 4</td>" in html  # arrays table


def test_several_runs_side_by_side_with_mui_directions(mui_run, tmp_path):
    a = mui_run("base", "ssd", 0.5, 0.02)
    b = mui_run("tuned", "ssd", 0.75, 0.01)
    c = mui_run("worse", "ssd", 0.25, 0.015)
    d = mui_run("other", "mmlu", 0.875, 0.03)
    html = write_report([a.path, b.path, c.path, d.path], tmp_path / "r.html").read_text(encoding="utf-8")
    side = _text_between(html, "<section id=\"comparison\">", "</section>")
    assert "<th>base</th><th>tuned</th><th>worse</th><th>other</th>" in side
    # each metric is one row, its interval beside the value; the first run has no delta
    assert "<tr><th>accuracy</th><td>0.5 [0.25, 0.75] n=10 wilson</td>" in side
    assert "<td>0.75 [0.5, 1] n=10 wilson <span class=delta>+0.25</span></td>" in side
    assert "<td>0.01 [0.005, 0.02] n=10 jackknife <span class=delta>-0.01</span></td>" in side
    assert "accuracy_ci" not in side and "mui_n" not in side
    rows = re.findall(r"<tr><td>ssd</td><td>base</td><td>(\w+)</td>.*?class=direction>(\w+)<", side)
    assert rows == [("tuned", "evolving"), ("worse", "collapsing")]
    assert "<th>accuracy / mui (from)</th>" in side and "paper 001 sec. 3.3" in side
    assert "other: task mmlu differs" in side
    assert html.count("<section class=run") == 4


def test_mcqa_and_mui_runs_give_no_direction(mcqa_run, mui_run, tmp_path):
    html = write_report([mui_run("m", "ssd", 0.1, 0.01).path, mcqa_run().path],
                        tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Direction each task moved" not in html
    assert "Runs side by side" in html


def test_default_out_and_folder_out(mcqa_run, tmp_path):
    run = mcqa_run()
    assert write_report([run.path]) == run.path / "report.html"
    folder = tmp_path / "reports"
    folder.mkdir()
    assert write_report([run.path], folder) == folder / "report.html"
    nested = tmp_path / "new" / "deeper" / "x.html"
    assert write_report([run.path], nested).is_file()


def test_unfinished_run_reports_its_samples(tmp_path):
    folder = RunFolder.create(tmp_path, {"suite": "mcqa", "model": "m", "task": "t"}, run_id="running")
    folder.append_samples([{"id": 1, "gold": 0, "labels": ["A", "B"], "letter_logits": [2, 1],
                            "pred_baseline": 0}])
    html = write_report([folder.path], tmp_path / "r.html", static=True).read_text(encoding="utf-8")
    assert "No results.json yet" in html and "<details class=sample>" in html


def test_not_a_run_folder_is_a_user_error(tmp_path):
    with pytest.raises(WhiteboxError, match="not a run folder"):
        write_report([tmp_path], tmp_path / "r.html")
    with pytest.raises(WhiteboxError, match="does not exist"):
        write_report([tmp_path / "missing"])
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(WhiteboxError, match="is a file"):
        write_report([tmp_path / "file.txt"])
    RunFolder.create(tmp_path / "runs", {"suite": "mcqa"}, run_id="inner")
    with pytest.raises(WhiteboxError, match=r"holds run folders \(inner\); give one or more"):
        write_report([tmp_path / "runs"])
    with pytest.raises(WhiteboxError, match="at least one"):
        write_report([])


def test_span_samples_link_to_their_rollout_map(tmp_path, make_plot):
    folder = RunFolder.create(tmp_path, {"suite": "span", "model": "m", "task": "long_addition"},
                              run_id="span")
    folder.append_samples([
        {"id": "base/id/0", "stage": "base/id", "index": 0, "input": "1+2=", "target": "3",
         "predicted": "4", "exact": False},
        {"id": "base/id/1", "stage": "base/id", "index": 1, "input": "2+2=", "target": "4",
         "predicted": "4", "exact": True}])
    make_plot(folder, "rollout_base_id_0")
    html = write_report([folder.path], tmp_path / "r.html", static=True).read_text(encoding="utf-8")
    assert "<h3>Attention maps (rollout with the reference mask)</h3>" in html
    assert "<a href='#run0-plot-rollout_base_id_0'>" in html and 'id="run0-plot-rollout_base_id_0"' in html
    assert html.count("href='#run0-plot-rollout") == 1  # sample 1 has no plotted map
    assert "<span class='bad'>model: 4</span>" in html and "<span class='ok'>model: 4</span>" in html


def test_scorers_read_gar_and_mui_samples():
    gar = {"id": "x", "target": "Yes", "label": "Yes", "prediction": "No",
           "probs": {"Yes": 0.2, "No": 0.7}, "correct": False}
    (s,) = scorers_of(gar)
    assert (s.name, s.pred, s.correct) == ("model", "No", False)
    mui = {"id": "y", "gold": "B", "response": "B. raven", "correct": True}
    (s,) = scorers_of(mui)
    assert (s.pred, s.correct) == ("B. raven", True)
    mcqa = {"id": 1, "gold": 2, "pred_baseline": 2, "pred_pride": 1, "cloze_loglik": [-3.0, -1.0, -2.0]}
    assert [(s.name, s.pred, s.correct) for s in scorers_of(mcqa)] == [
        ("baseline", 2, True), ("pride", 1, False), ("cloze", 1, False)]


def test_a_run_under_edits_is_named_so(tmp_path):
    folder = RunFolder.create(tmp_path, {"suite": "mcqa", "model": "m", "task": "t",
                                         "edits": ["ablate:L1H0", "steer:resid:2:v.npy*4"]}, run_id="edited")
    folder.append_samples([{"id": "a", "x": 1}])
    html = write_report([folder.path], tmp_path / "r.html", static=True).read_text(encoding="utf-8")
    assert "under --edit ablate:L1H0, steer:resid:2:v.npy*4" in html
