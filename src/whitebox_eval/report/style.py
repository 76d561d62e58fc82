"""The page's inline style and its Content-Security-Policy (no network, no script)."""

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
"""Only inline style and data: images: nothing is fetched and no script runs."""

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1200px; padding: 1em 2em; color: #222; }
h1 { font-size: 1.6em; margin-bottom: .2em; }
h2 { border-bottom: 2px solid #999; padding-bottom: .2em; margin-top: 2em; }
h3 { margin: 1.2em 0 .4em; }
summary h3 { display: inline; }
.meta, .note { color: #666; font-size: .92em; }
.note.warning { color: #a40000; }
ul.nav { padding-left: 1.2em; }
table { border-collapse: collapse; margin: .4em 0 .8em; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: left; vertical-align: top; }
thead th { background: #eee; }
tbody th { font-weight: normal; color: #333; background: #f7f7f7; font-family: ui-monospace, monospace; }
table.metrics td, table.scores td { font-family: ui-monospace, monospace; text-align: right; }
tr.headline th, tr.headline td { font-weight: bold; }
td, th { max-width: 60em; overflow-wrap: anywhere; }
.delta { color: #555; font-size: .9em; }
.direction { font-weight: bold; }
.figures { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
figure { margin: 0; border: 1px solid #ddd; padding: .4em; max-width: 100%; }
figure img { max-width: 560px; width: 100%; height: auto; display: block; }
figcaption { font-size: .85em; color: #555; font-family: ui-monospace, monospace; }
details.sample { border: 1px solid #ddd; margin: 2px 0; padding: 2px 6px; }
details.sample[open] { background: #fcfcfc; }
details.sample summary { cursor: pointer; font-family: ui-monospace, monospace; font-size: .9em; }
.sample .body { padding: .4em 0 .4em 1em; }
.sample pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f4f4f4; padding: .4em; margin: .2em 0; }
.sample .field { margin: .3em 0; }
.ok { color: #1a7f37; } .bad { color: #b3261e; } .plain { color: #333; }
.gold { font-weight: bold; }
td.gold { background: #fff4cc; } th.gold { background: #ffe58f; }
td.pred { outline: 2px solid #4a6ee0; outline-offset: -2px; }
.split { color: #777; }
ol.options { margin: .2em 0; padding-left: 1.2em; list-style: none; }
.lbl { font-weight: bold; margin-right: .4em; }
"""
