// Build each run's explorer from the page's JSON block.
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('wb-data').textContent);
  for (const run of data.runs) {
    const root = document.querySelector(`[data-explorer="${run.key}"]`);
    if (!root || !run.items.length) continue;
    const state = {item: null, head: 0, pick: null, scale: 'rest'};
    const detail = WB.el('div', {class: 'detail'});
    const view = WB.views[run.suite];
    function redraw() {
      detail.replaceChildren();
      if (state.item === null) { detail.append(WB.el('p', {class: 'note'}, 'select an item above to see its views')); return; }
      const it = run.items[state.item];
      detail.setAttribute('data-item', state.item);
      detail.append(WB.itemSummary(run, it), ...(view && it[run.suite] ? view(run, state, it, redraw) : []));
    }
    root.append(WB.itemTable(run, state, () => { state.pick = null; redraw(); }), detail);
    redraw();
  }
  const cmp = document.querySelector('[data-explorer="compare"]');
  if (cmp) WB.compare(data.runs, cmp);
  document.documentElement.setAttribute('data-explorer-ready', '1');
}());
