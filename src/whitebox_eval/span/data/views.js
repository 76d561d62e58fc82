// AttentionSpan (paper 003): the kept rollouts beside their reference masks.
WB.views.span = function (run, state, it) {
  const s = it.span;
  const view = WB.section('rollout', 'attention rollout (rows: prediction positions) beside the reference mask');
  view.append(WB.el('p', {}, `target ${WB.fmt(s.target)}, predicted ${WB.fmt(s.predicted)}; reference score per target token: ` +
    (s.scores ? s.scores.map(x => WB.fmt(x, 3)).join(', ') : '\u2014')));
  if (!s.rollout) {
    view.append(WB.el('p', {class: 'note'}, 'the run kept no rollout for this example (span keeps the first --heatmaps examples per stage).'));
    return [view];
  }
  const rows = s.rows || s.rollout.map((_, r) => r);
  const n = s.rollout.length;
  const matrix = (title, value, rgb, kind) => {
    const t = WB.el('table', {class: 'matrix', 'data-matrix': kind});
    t.append(WB.el('caption', {}, title));
    rows.forEach((r, k) => {
      const tr = WB.el('tr', {}, WB.el('th', {}, s.tokens ? s.tokens[r + 1] || '' : r));
      for (let c = 0; c < n; c++) {
        const x = value(k, r, c);
        const td = WB.el('td', {title: `${r},${c}: ${WB.fmt(x)}`, 'data-value': x});
        td.style.background = WB.shade(x || 0, 1, rgb);
        tr.append(td);
      }
      t.append(tr);
    });
    return t;
  };
  const wrap = WB.el('div', {class: 'pair'}, matrix('rollout', (k, r, c) => s.rollout[r][c], '200, 60, 20', 'rollout'));
  if (s.reference) wrap.append(matrix('reference mask', (k, r, c) => s.reference[k] ? s.reference[k][c] : 0, '20, 120, 40', 'reference'));
  view.append(wrap);
  return [view];
};
