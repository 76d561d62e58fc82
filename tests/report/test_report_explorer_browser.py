"""The item explorer clicked in a real (headless) Chromium, on real runs of every suite made
with tiny random models (explorer_runs.py).

Set ``WHITEBOX_SCREENSHOTS=DIR`` to keep a screenshot of each view there (docs/explorer/).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from whitebox_eval.report import write_report

sys.path.insert(0, str(Path(__file__).parent))
import explorer_runs  # noqa: E402

SHOTS = os.environ.get("WHITEBOX_SCREENSHOTS")


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("runs")


def samples_of(run_path: Path) -> list[dict]:
    return [json.loads(line) for line in (run_path / "samples.jsonl").read_text(encoding="utf-8").splitlines()]


def open_page(browser, page: Path):
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(page.resolve().as_uri())
    assert browser.find_element("css selector", "html").get_attribute("data-explorer-ready") == "1"
    return browser


def report_of(browser, run, tmp_path: Path):
    """(the run's samples, the browser showing its report)."""
    return samples_of(run.path), open_page(browser, write_report([run.path], tmp_path / "r.html"))


def done(page, view: str, name: str) -> None:
    """Keep the view's screenshot (WHITEBOX_SCREENSHOTS) and check the console stayed silent."""
    shot(page, view, name)
    quiet(page)


def css(browser, selector: str, within=None):
    return (within or browser).find_elements("css selector", selector)


def listed_ids(browser, run: str = "run0") -> list[str]:
    return [td.text for td in css(browser, f"[data-explorer={run}] [data-view=items] tbody td.id")]


def select_item(browser, item_id: str, run: str = "run0") -> None:
    (row,) = [tr for tr in css(browser, f"[data-explorer={run}] [data-view=items] tbody tr")
              if css(browser, "td.id", tr)[0].text == item_id]
    row.click()


def choose(browser, selector: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(css(browser, selector)[0]).select_by_value(value)


def shot(browser, view: str, name: str) -> None:
    if SHOTS:
        (element,) = css(browser, f"[data-view={view}]")
        browser.execute_script("arguments[0].scrollIntoView()", element)
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        element.screenshot(str(Path(SHOTS) / f"{name}.png"))


def quiet(browser) -> None:
    assert browser.get_log("browser") == []  # no errors, no CSP violations, no blocked loads


# ---------------------------------------------------------------------- mcqa (SSD)


@pytest.fixture(scope="module")
def ssd(root):
    return explorer_runs.mcqa(root)


def test_mcqa_head_right_baseline_wrong_attention_peak_and_head_click(browser, ssd, tmp_path):
    samples = samples_of(ssd.path)
    lens = np.load(ssd.path / "arrays" / "lens.npy")
    page = open_page(browser, write_report([ssd.path], tmp_path / "r.html"))
    assert len(listed_ids(page)) == len(samples)

    # filter: the baseline wrong and the attention head right, as samples.jsonl says
    choose(page, "[data-filter='baseline']", "incorrect")
    choose(page, "[data-filter='attention head']", "correct")
    wanted = [s["id"] for s in samples if s["pred_baseline"] != s["gold"] and s["attention_head"]["pred"] == s["gold"]]
    assert wanted and listed_ids(page) == wanted
    s = next(x for x in samples if x["id"] in wanted and not x["attention_head"]["tied"])
    select_item(page, s["id"])

    # the chosen head's attention on the prompt tokens, read from the page
    (view,) = css(page, "[data-view=attention]")
    layer, head = s["attention_head"]["head"]
    assert view.get_attribute("data-head") == f"{layer}.{head}"
    tokens = css(page, ".tok", view)
    assert [t.get_attribute("data-pos") for t in tokens] == [str(s["prompt_tokens_from"] + j) for j in range(len(tokens))]
    options = {t.get_attribute("data-option"): float(t.get_attribute("data-attention")) for t in css(page, ".tok.opt", view)}
    assert list(options) == s["labels"]
    peak = max(options, key=options.get)
    assert peak == s["labels"][s["attention_head"]["pred"]] == s["labels"][s["gold"]]
    np.testing.assert_allclose(list(options.values()), s["attention_head"]["scores"], rtol=1e-5)
    weights = [float(t.get_attribute("data-attention")) for t in tokens]
    before = float(css(page, "[data-view=attention] [data-before]")[0].get_attribute("data-before"))
    assert sum(weights) + before == pytest.approx(1.0, abs=1e-3)
    shot(page, "attention", "mcqa-attention")

    # the gold option's lens probability per layer
    bars = css(page, "[data-view=lens] .bar")
    i, n = s["doc_id"], len(s["labels"])
    p = np.exp(lens[i, :, :n] - lens[i, :, :n].max(-1, keepdims=True))
    p = (p / p.sum(-1, keepdims=True))[:, s["gold"]]
    np.testing.assert_allclose([float(b.get_attribute("data-prob")) for b in bars], p, rtol=1e-3)
    shot(page, "lens", "mcqa-lens")

    # another kept head in the grid: the view changes to that head on the same item
    other = next(td for td in css(page, "[data-view=head-grid] td.kept[data-method=attention]")
                 if "current" not in td.get_attribute("class"))
    target = other.get_attribute("data-head")
    other.click()
    (view,) = css(page, "[data-view=attention]")
    assert view.get_attribute("data-head") == target != f"{layer}.{head}"
    l2, h2 = map(int, target.split("."))
    attention = np.load(ssd.path / "arrays" / "attention.npy")
    moved = [float(t.get_attribute("data-attention")) for t in css(page, ".tok.opt", view)]
    np.testing.assert_allclose(moved, attention[i, l2, h2, :n], rtol=1e-5)
    assert moved != list(options.values())
    cells = css(page, "[data-view=head-grid] td[data-method=attention]")
    table = np.load(ssd.path / "arrays" / "attention_head_accuracy.npy")
    degenerate = np.load(ssd.path / "arrays" / "attention_degenerate_heads.npy")
    assert len(cells) == table.size
    for td in cells:
        l3, h3 = map(int, td.get_attribute("data-head").split("."))
        assert ("degenerate" in td.get_attribute("class")) == bool(degenerate[l3, h3])
        assert td.text == ("\u00d7" if degenerate[l3, h3] else f"{table[l3, h3]:.2f}")
    shot(page, "head-grid", "mcqa-head-grid")
    # a head the run did not keep says so
    css(page, "[data-view=head-grid] td[data-method=attention]:not(.kept)")[0].click()
    assert "is not one of the" in css(page, "[data-view=attention]")[0].text
    quiet(page)


def test_items_search_and_sort(browser, ssd, tmp_path):
    samples, page = report_of(browser, ssd, tmp_path)
    box = css(page, "[data-filter=search]")[0]
    box.send_keys(samples[7]["id"])
    assert listed_ids(page) == [s["id"] for s in samples if samples[7]["id"] in s["id"]]
    box.clear()
    box.send_keys("x")  # input events fire per key; an empty search lists every item again
    box.send_keys("\b")
    choose(page, "[data-sort]", "desc:n_tokens")
    longest = sorted(samples, key=lambda s: -s["n_tokens"])
    assert [s["n_tokens"] for s in longest][0] == max(s["n_tokens"] for s in samples)
    shown = {s["id"]: s["n_tokens"] for s in samples}
    assert [shown[i] for i in listed_ids(page)] == sorted(shown.values(), reverse=True)
    choose(page, "[data-sort]", "asc:p(gold) baseline")  # the baseline's softmax probability of the gold letter
    p_gold = {}
    for s in samples:
        z = np.exp(np.array(s["letter_logits"]) - max(s["letter_logits"]))
        p_gold[s["id"]] = z[s["gold"]] / z.sum()
    order = [p_gold[i] for i in listed_ids(page)]
    assert len(order) == len(samples) and all(a <= b * (1 + 1e-3) for a, b in zip(order, order[1:]))
    page.find_element("css selector", "[data-filter=disagree]").click()
    disagree = [s["id"] for s in samples if len({s["pred_baseline"], s["qk_head"]["pred"], s["attention_head"]["pred"]}) > 1]
    assert sorted(listed_ids(page)) == sorted(disagree)
    done(page, "items", "items")


def test_hostile_text_stays_text_in_the_explorer(browser, mcqa_run, payloads, tmp_path):
    page = open_page(browser, write_report([mcqa_run(n_samples=3).path], tmp_path / "r.html"))
    select_item(page, f"item-1-{payloads['script']}")
    assert page.title.startswith("whitebox-eval report: hostile")
    assert page.find_element("css selector", "body").get_attribute("data-pwned") is None
    assert len(css(page, "img")) == 2  # the two plots; the data's <img> is text
    assert len(css(page, "script")) == 2  # the data block and the page's script, nothing injected
    (text,) = css(page, ".detail pre.itemtext")
    assert text.text == f"Question 1: {payloads['script']} {payloads['img']} {payloads['amp']} {payloads['quotes']}"
    assert css(page, ".detail span.id")[0].text == f"item-1-{payloads['script']}"
    quiet(page)


# ---------------------------------------------------------------------- two runs


def test_two_runs_side_by_side(browser, ssd, root, tmp_path):
    other = explorer_runs.mcqa(root, run_id="mcqa-other", limit=20, seed=7)
    page = open_page(browser, write_report([ssd.path, other.path], tmp_path / "r.html"))
    (view,) = css(page, "[data-view=compare]")
    item = samples_of(other.path)[3]
    choose(page, "[data-compare=item]", item["id"])
    sides = css(page, ".side", view)
    assert [s.get_attribute("data-run") for s in sides] == ["mcqa", "mcqa-other"]
    for side, run in zip(sides, (ssd, other)):
        (s,) = [x for x in samples_of(run.path) if x["id"] == item["id"]]
        chips = [c.text for c in css(page, ".chip", side)]
        assert chips[0] == f"baseline: {s['labels'][s['pred_baseline']]}"
        assert f"attention head: {s['labels'][s['attention_head']['pred']]}" in chips
    assert len(css(page, "[data-explorer=run1] [data-view=items] tbody tr")) == 20
    done(page, "compare", "compare")


# ---------------------------------------------------------------------- gar, span, mui, formats


def test_gar_flips_per_arm(browser, root, tmp_path):
    from whitebox_eval.models import load_model
    from whitebox_eval.errors import WhiteboxError

    try:
        tokenizer = load_model("smollm2-135m").tokenizer
    except WhiteboxError as e:  # pragma: no cover - bundled model not installed
        pytest.skip(f"smollm2-135m not available: {e}")
    run = explorer_runs.gar_intervene(root, tokenizer)
    samples = samples_of(run.path)
    by_key: dict[str, dict] = {}
    for s in samples:
        stage, key = s["id"].split(":", 1)
        by_key.setdefault(key, {})[stage] = s
    page = open_page(browser, write_report([run.path], tmp_path / "r.html"))
    assert listed_ids(page) == list(by_key)
    key = list(by_key)[1]
    select_item(page, key)
    rows = css(page, "[data-view=flips] tbody tr")
    assert [r.get_attribute("data-stage") for r in rows] == ["base", "strong", "weak", "knockout"]
    for r in rows:
        s = by_key[key][r.get_attribute("data-stage")]
        cells = [c.text for c in css(page, "td", r)]
        assert cells[0] == s["prediction"] and float(cells[1]) == pytest.approx(s["target_prob"], rel=1e-3)
        flipped = s["correct"] != by_key[key]["base"]["correct"]
        assert ("flipped" in (r.get_attribute("class") or "")) == flipped
    matched = np.load(next((run.path / "arrays").glob("matched_*.npy")))
    chips = css(page, "[data-view=flips] .chip")
    assert [c.get_attribute("data-head") for c in chips] == ["1.0", "1.1"]
    n = list(by_key).index(key)
    assert float(chips[0].text.split(": ")[1]) == pytest.approx(float(matched[n, 1, 0]), rel=1e-3)
    done(page, "flips", "gar-flips")


def test_span_rollout_beside_the_reference_mask(browser, root, tmp_path):
    run = explorer_runs.span(root)
    s = samples_of(run.path)[0]
    page = open_page(browser, write_report([run.path], tmp_path / "r.html"))
    select_item(page, s["id"])
    (view,) = css(page, "[data-view=rollout]")
    name = s["stage"].replace("/", "_") + f"_{s['index']}"
    rollout = np.load(run.path / "arrays" / f"rollout_{name}.npy")
    reference = np.load(run.path / "arrays" / f"reference_{name}.npy")
    roll_rows = css(page, "table[data-matrix=rollout] tr", view)
    ref_rows = css(page, "table[data-matrix=reference] tr", view)
    assert len(roll_rows) == len(ref_rows) == len(s["prediction_positions"]) == reference.shape[0]
    for k, (r, q) in enumerate(zip(roll_rows, ref_rows)):
        got = [float(td.get_attribute("data-value")) for td in css(page, "td", r)]
        np.testing.assert_allclose(got, rollout[s["prediction_positions"][k]], rtol=1e-3, atol=1e-6)
        assert [int(td.get_attribute("data-value")) for td in css(page, "td", q)] == reference[k].astype(int).tolist()
    assert "reference score per target token" in view.text
    done(page, "rollout", "span-rollout")


def test_mui_key_features_with_an_sae(browser, root, tmp_path):
    run = explorer_runs.mui_sae(root)
    samples, page = report_of(browser, run, tmp_path)
    s = max(samples, key=lambda x: x["n_key_units"])
    select_item(page, s["id"])
    counts = [int(b.get_attribute("data-count")) for b in css(page, "[data-view=neurons] .bar")]
    assert sum(counts) == s["n_key_units"] > 0
    units = [c.get_attribute("data-unit") for c in css(page, "[data-view=neurons] .chip")]
    assert len(units) == min(64, s["n_key_units"])
    features = css(page, "[data-view=features] .feature")
    assert features and all(("used" in f.get_attribute("class")) == (f.get_attribute("data-unit") in units) for f in features)
    assert "Question:" in css(page, ".detail pre.itemtext")[0].text  # the prompt the line now holds
    tokens = css(page, "[data-view=neurons] .tok[data-token]")
    assert [t.get_attribute("textContent") for t in tokens] == s["response_tokens"]
    assert sum(int(t.get_attribute("data-key-units")) for t in tokens) == s["n_key_units"]  # each counted once
    busiest = max(range(len(tokens)), key=lambda j: s["token_key_units"][j])
    tokens[busiest].click()
    rows = css(page, f"[data-view=neurons] table[data-token='{busiest}'] tr")
    assert [(r.get_attribute("data-unit"), float(css(page, "td", r)[0].text)) for r in rows] == \
        [(u, pytest.approx(x, rel=1e-3)) for u, x in s["token_top_units"][busiest]]
    # a feature's activating tokens: where it is among a response token's top units, best first
    feature = features[0].get_attribute("data-unit")
    expected = sorted(((x, t) for r in samples for t, top in zip(r["response_tokens"], r["token_top_units"])
                       for u, x in top if u == feature and x > 0), key=lambda a: -a[0])[:8]
    acts = css(page, ".act", features[0])
    assert [float(a.get_attribute("data-score")) for a in acts] == pytest.approx([x for x, _ in expected], rel=1e-3)
    done(page, "features", "mui-features")


def test_formats_letters_beside_free_answers(browser, root, tmp_path):
    from whitebox_eval.formats.answers import classes_of

    run = explorer_runs.formats(root)
    samples, page = report_of(browser, run, tmp_path)
    s = samples[2]
    select_item(page, s["id"])
    (view,) = css(page, "[data-view=formats]")
    renorm = css(page, "tr[data-key=p_renorm] td", view)[0].text
    assert float(renorm) == pytest.approx(s["mcq"]["p_renorm"], rel=1e-3)
    assert css(page, ".detail pre.itemtext")[0].get_attribute("textContent") == s["prompts"]["mcq_plain"]
    for fmt, gens in s["generations"].items():
        (box,) = css(page, f"div.gens[data-format={fmt}]", view)
        assert [pre.get_attribute("textContent") for pre in css(page, "li pre", box)] == gens  # exact, control characters too
        # each answer's class beside it (formats/answers.py; this run is classified from its texts)
        assert [li.get_attribute("data-class") for li in css(page, "li", box)] == \
            classes_of(s, fmt, "number" if isinstance(s["answer"], (int, float)) else "text")
        p = css(page, f"tr[data-format={fmt}] td", view)[0].text
        assert float(p) == pytest.approx(s["p_correct"][fmt], rel=1e-3)
    done(page, "formats", "formats")
