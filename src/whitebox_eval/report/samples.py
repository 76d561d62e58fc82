"""The sample viewer: one collapsible entry per sample with its text, gold, and each
scorer's prediction and scores.

Suites store different fields, so the viewer reads what a sample has:

* text: ``prompt``, ``question``, ``context``, ``input``, ``response``, ``predicted``
  and the options (``options`` / ``choices`` / ``alternatives``), labelled by ``labels``;
* gold: ``gold`` (an option index in MCQA, shown as its label), ``target``, ``label``
  or ``answer``;
* scorers: ``pred_baseline`` with ``letter_logits``; every ``<method>_head`` record
  ``{head, scores, pred}``; other ``pred_<name>``; ``cloze_loglik[_norm]`` (prediction =
  argmax); ``prediction`` with ``probs``; a free-text ``predicted`` / ``response`` judged
  by ``correct``;
* AttentionSpan samples (``stage`` + ``index``) link to their rollout heatmap with the
  reference mask when the run plotted it;
* every other field is listed as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from whitebox_eval.report.markup import Markup, join, render
from whitebox_eval.report.metrics import cut, format_value
from whitebox_eval.runs.items import Scorer, gold_key, gold_of, scorers_of

TEXT_KEYS = ("prompt", "question", "context", "input", "text")
OPTION_KEYS = ("options", "choices", "alternatives")


def plot_anchor(run_key: str, plot_name: str) -> str:
    """The element id of a plot in the page (shared by the plot section and sample links)."""
    return f"{run_key}-plot-{plot_name}"


def render_samples(samples: list[dict[str, Any]], n_total: int, run_key: str,
                   plot_names: set[str]) -> Markup:
    """The viewer for ``samples`` (already capped) of a run holding ``n_total`` samples."""
    if not samples:
        return render("<p class=note>This run has no samples yet.</p>")
    note = ""
    if n_total > len(samples):
        note = render("<p class=note>Showing the first {shown} of {total} samples "
                      "(the rest are in samples.jsonl).</p>", shown=len(samples), total=n_total)
    entries = join(_sample_entry(i, s, run_key, plot_names) for i, s in enumerate(samples))
    return render("{note}<div class=samples>{entries}</div>", note=note, entries=entries)


def _consumed(sample: Mapping[str, Any]) -> set[str]:
    keys = {"id", "pred_baseline", "letter_logits", "labels", "cloze_loglik", "cloze_loglik_norm",
            "prediction", "probs", *TEXT_KEYS, *OPTION_KEYS}
    keys |= {k for k in sample if k.startswith("pred_")}
    keys |= {k for k, v in sample.items() if k.endswith("_head") and isinstance(v, Mapping) and "pred" in v}
    gold = gold_key(sample)
    if gold:
        keys.add(gold)
    if "prediction" not in sample:
        keys |= {"predicted", "response"} & set(sample)
    return keys


def _sample_entry(i: int, sample: dict[str, Any], run_key: str, plot_names: set[str]) -> Markup:
    labels = sample.get("labels") if isinstance(sample.get("labels"), list) else None
    gold = gold_of(sample)
    scorers = scorers_of(sample)
    summary = join([
        render("<span class=sid>#{n} {id}</span>", n=i, id=cut(str(sample.get("id", "")), 160)),
        render(" <span class=gold>gold: {g}</span>", g=_label(gold, labels, short=True)),
        *(render(" <span class='{cls}'>{name}: {pred}</span>", cls=_mark_class(s.correct), name=s.name,
                 pred=cut(_label(s.pred, labels, short=True), 60)) for s in scorers),
        render(" <span class=split>{split}</span>", split=sample["split"]) if "split" in sample else "",
    ])
    body = join([_texts(sample, labels), _gold_block(gold, labels), _score_table(scorers, gold, labels),
                 _rollout_link(sample, run_key, plot_names), _other_fields(sample)])
    return render("<details class=sample><summary>{summary}</summary><div class=body>{body}</div></details>",
                  summary=summary, body=body)


def _texts(sample: Mapping[str, Any], labels: list | None) -> Markup:
    parts = []
    for key in TEXT_KEYS:
        if key in sample and sample[key] is not None:
            parts.append(render("<div class=field><b>{k}</b><pre>{v}</pre></div>", k=key,
                                v=cut(str(sample[key]))))
    for key in OPTION_KEYS:
        options = sample.get(key)
        if isinstance(options, list):
            items = join(render("<li><span class=lbl>{l}</span> {t}</li>", l=_option_label(j, labels),
                                t=cut(format_value(o) if not isinstance(o, str) else o, 500))
                         for j, o in enumerate(options))
            parts.append(render("<div class=field><b>{k}</b><ol class=options>{items}</ol></div>",
                                k=key, items=items))
    return join(parts)


def _gold_block(gold: Any, labels: list | None) -> Markup:
    if gold is None:
        return Markup("")
    return render("<div class=field><b>gold</b> <span class=gold>{g}</span></div>",
                  g=_label(gold, labels, short=False))


def _score_table(scorers: list[Scorer], gold: Any, labels: list | None) -> Markup:
    if not scorers:
        return Markup("")
    columns = _score_columns(scorers, labels)
    head = join(render("<th class='{cls}'>{c}</th>", cls="gold" if _is_column(gold, j, c) else "",
                       c=c) for j, c in enumerate(columns))
    rows = []
    for s in scorers:
        cells = []
        for j, c in enumerate(columns):
            value = _score_at(s.scores, j, c)
            marks = (("pred", _is_column(s.pred, j, c)), ("gold", _is_column(gold, j, c)))
            cls = " ".join(name for name, on in marks if on)
            cells.append(render("<td class='{cls}'>{v}</td>", cls=cls,
                                v="" if value is None else format_value(value)))
        rows.append(render("<tr><th>{name}</th><td class='{cls}'>{pred}</td>{cells}</tr>", name=s.name,
                           cls=_mark_class(s.correct), pred=cut(_label(s.pred, labels, short=False), 300),
                           cells=join(cells)))
    return render("<table class=scores><thead><tr><th>scorer</th><th>prediction</th>{head}</tr></thead>"
                  "<tbody>{rows}</tbody></table>", head=head, rows=join(rows))


def _score_columns(scorers: list[Scorer], labels: list | None) -> list[str]:
    width = max((len(s.scores) for s in scorers if isinstance(s.scores, list)), default=0)
    if width:
        return [str(_option_label(j, labels)) for j in range(width)]
    keys: list[str] = []
    for s in scorers:
        if isinstance(s.scores, Mapping):
            keys.extend(str(k) for k in s.scores if str(k) not in keys)
    return keys


def _score_at(scores: Any, j: int, column: str) -> Any:
    if isinstance(scores, list):
        return scores[j] if j < len(scores) else None
    if isinstance(scores, Mapping):
        return scores.get(column)
    return None


def _is_column(value: Any, j: int, column: str) -> bool:
    """Whether ``value`` (an option index, or an option's text) names column ``j``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value == j
    return value is not None and str(value) == column


def _rollout_link(sample: Mapping[str, Any], run_key: str, plot_names: set[str]) -> Markup:
    stage, index = sample.get("stage"), sample.get("index")
    if not isinstance(stage, str) or not isinstance(index, int):
        return Markup("")
    name = f"rollout_{stage.replace('/', '_').replace('.', 'p')}_{index}"
    if name not in plot_names:
        return Markup("")
    return render("<p><a href='#{anchor}'>attention rollout with the reference mask ({name})</a></p>",
                  anchor=plot_anchor(run_key, name), name=name)


def _other_fields(sample: Mapping[str, Any]) -> Markup:
    skip = _consumed(sample)
    rows = [render("<tr><th>{k}</th><td>{v}</td></tr>", k=k, v=format_value(v))
            for k, v in sample.items() if k not in skip]
    if not rows:
        return Markup("")
    return render("<table class=fields><tbody>{rows}</tbody></table>", rows=join(rows))


def _option_label(j: int, labels: list | None) -> str:
    return str(labels[j]) if labels is not None and j < len(labels) else str(j)


def _label(value: Any, labels: list | None, short: bool) -> str:
    """An option index shown as its label (``D`` or ``D (3)``); other values as text."""
    if isinstance(value, int) and not isinstance(value, bool) and labels is not None \
            and 0 <= value < len(labels):
        return str(labels[value]) if short else f"{labels[value]} ({value})"
    return format_value(value)


def _mark_class(correct: bool | None) -> str:
    return {True: "ok", False: "bad"}.get(correct, "plain")  # type: ignore[arg-type]


__all__ = ["Scorer", "plot_anchor", "render_samples", "scorers_of"]
