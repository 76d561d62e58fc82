// Several runs: the same item (by id) in each run side by side.
WB.compare = function (runs, root) {
  const ids = new Map();
  runs.forEach((run, r) => run.items.forEach((it, i) => {
    if (!ids.has(it.id)) ids.set(it.id, []);
    ids.get(it.id).push([r, i]);
  }));
  const shared = [...ids.entries()].filter(([, at]) => at.length > 1);
  const view = WB.el('div', {'data-view': 'compare', class: 'view'},
    WB.el('h4', {}, `the same item across runs (${shared.length} items in more than one run)`));
  const pick = WB.el('select', {'data-compare': 'item'}, ...shared.map(([id]) => WB.el('option', {value: id}, id)));
  const body = WB.el('div', {class: 'pair'});
  function draw() {
    body.replaceChildren();
    for (const [r, i] of ids.get(pick.value) || []) {
      const run = runs[r], it = run.items[i];
      body.append(WB.el('div', {class: 'side', 'data-run': run.id},
        WB.el('h5', {}, `${run.id} (${run.model || '?'})`), WB.itemSummary(run, it)));
    }
  }
  pick.addEventListener('change', draw);
  view.append(WB.el('label', {}, 'item ', pick), body);
  if (shared.length) draw();
  root.append(view);
};
