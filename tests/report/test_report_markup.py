"""Escaping by default: esc, render, join; value formatting and flattening."""

from __future__ import annotations

from whitebox_eval.report.markup import Markup, esc, join, render
from whitebox_eval.report.metrics import delta, flatten, format_delta, format_value, metric_rows


def test_esc_escapes_all_html_specials_and_leaves_markup_alone():
    assert esc("<a href=\"x\">O'Neil & co</a>") == \
        "&lt;a href=&quot;x&quot;&gt;O&#x27;Neil &amp; co&lt;/a&gt;"
    assert esc("&amp;") == "&amp;amp;"  # an entity in data stays literal text
    assert esc(3) == "3"
    safe = Markup("<b>ok</b>")
    assert esc(safe) is safe


def test_render_escapes_every_value_but_not_the_template():
    out = render("<td class='{cls}'>{text}</td>", cls="x' onmouseover='evil()", text="<script>")
    assert out == "<td class='x&#x27; onmouseover=&#x27;evil()'>&lt;script&gt;</td>"
    assert isinstance(out, Markup)
    nested = render("<tr>{cell}</tr>", cell=out)  # Markup from render is inserted as is
    assert nested == f"<tr>{out}</tr>"


def test_join_escapes_plain_parts():
    assert join([Markup("<i>a</i>"), "<b>"], sep=" ") == "<i>a</i> &lt;b&gt;"


def test_format_value_cuts_long_lists_and_formats_numbers():
    assert format_value(0.123456789) == "0.1235"
    assert format_value(None) == "\u2014"
    assert format_value(True) == "true"
    text = format_value(list(range(100)), max_items=3)
    assert text == "[0, 1, 2, \u2026 (100 items)]"


def test_metric_rows_put_the_headline_first_in_stored_order():
    results = {"a": 1, "headline": {"z": 0.5, "b": 0.25}, "nested": {"x": {"y": 2}}, "empty": {}}
    headline, rest = metric_rows(results)
    assert headline == [("z", 0.5), ("b", 0.25)]
    assert rest == [("a", 1), ("nested.x.y", 2), ("empty", {})]
    assert flatten({"a": {"b": [1, 2]}}) == [("a.b", [1, 2])]


def test_delta_only_for_finite_numbers():
    assert delta(0.5, 0.75) == 0.25
    assert delta(0.5, None) is None and delta("x", 1) is None and delta(True, 1) is None
    assert format_delta(0.25) == "+0.25" and format_delta(None) == ""
