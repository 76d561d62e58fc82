// MCQA (paper 000): a kept head's attention over the prompt, the option scores, the logit lens, the head grid.
WB.views.mcqa = function (run, state, it, redraw) {
  const v = it.mcqa || {};
  const labels = v.labels || [];
  const out = [];
  const [l, h] = state.pick || run.heads[state.head] || [null, null];
  const kept = state.pick ? -1 : state.head;
  const role = [];
  for (const [m, hd] of Object.entries(run.chosen || {})) if (hd[0] === l && hd[1] === h) role.push(`best ${m} head`);
  const title = l === null ? 'attention' : `head L${l}.H${h}` + (role.length ? ` (${role.join(', ')})` : '') +
    ': attention from the answer position over the prompt';
  const att = WB.section('attention', title);
  att.setAttribute('data-head', l === null ? '' : `${l}.${h}`);
  if (kept < 0) {
    att.append(WB.el('p', {class: 'note'}, `L${l}.H${h} is not one of the ${run.heads.length} heads this run keeps ` +
      'per item; click an outlined head in the grid.'));
  } else if (v.rows) {
    const row = WB.f32(v.rows[kept]);
    // shading scale: the row's largest weight, without the first token (often an attention sink), or the option tokens'
    const scales = {all: 'largest weight', rest: 'largest weight after the first token', options: 'largest weight on an option token'};
    const scale = WB.el('select', {'data-scale': ''}, ...Object.entries(scales).map(([k, t]) =>
      WB.el('option', {value: k, selected: k === state.scale ? 'selected' : null}, t)));
    scale.addEventListener('change', () => { state.scale = scale.value; redraw(); });
    let max = 0;
    row.forEach((x, j) => {
      const use = state.scale === 'all' || (state.scale === 'rest' ? j > 0 : v.options.includes(v.start + j));
      if (use) max = Math.max(max, x);
    });
    att.append(WB.el('p', {class: 'note'}, 'shade by the ', scale));
    const tokens = WB.el('div', {class: 'tokens'});
    v.tokens.forEach((t, j) => {
      const pos = v.start + j;
      const k = v.options.indexOf(pos);
      const shown = t.includes('\n') ? t.replace(/\n/g, '\u21b5\n') : t;  // a visible mark for line ends
      const span = WB.el('span', {class: k >= 0 ? 'tok opt' : 'tok', 'data-pos': pos, 'data-attention': row[j],
        'data-option': k >= 0 ? labels[k] : null, title: `${pos}: ${WB.fmt(row[j])}`}, shown);
      span.style.background = WB.shade(row[j], max, '220, 60, 30');
      if (k >= 0) span.prepend(WB.el('sup', {class: 'optlabel'}, labels[k]));
      tokens.append(span);
    });
    att.append(tokens);
    if (v.before) att.append(WB.el('p', {class: 'note', 'data-before': v.before[kept]}, `attention on the tokens before these (demonstrations, BOS): ${WB.fmt(v.before[kept])}; ` +
      `shading: share of the ${scales[state.scale]} (${WB.fmt(max)})`));
  } else {
    att.append(WB.el('p', {class: 'note'}, 'this run did not keep attention rows over the prompt (made before they were kept); the option scores are below.'));
  }
  if (kept >= 0 && (v.attention || v.qk)) {
    const a = v.attention ? v.attention[kept] : null, q = v.qk ? v.qk[kept] : null;
    const best = xs => xs ? xs.indexOf(Math.max(...xs.filter(x => x !== null))) : -1;
    const ba = best(a), bq = best(q);
    const rows = labels.map((lab, k) => WB.el('tr', {'data-option': lab},
      WB.el('th', {class: k === v.gold ? 'gold' : null}, lab),
      WB.el('td', {class: k === ba ? 'pred' : null}, WB.fmt(a ? a[k] : null)),
      WB.el('td', {class: k === bq ? 'pred' : null}, WB.fmt(q ? q[k] : null))));
    att.append(WB.el('table', {class: 'scores optionscores'},
      WB.el('thead', {}, WB.el('tr', {}, WB.el('th', {}, 'option'), WB.el('th', {}, 'Attention-score'), WB.el('th', {}, 'QK-score'))),
      WB.el('tbody', {}, ...rows)));
  }
  out.push(att);

  if (v.lens) {
    const lens = WB.section('lens', `logit lens: P(gold option ${labels[v.gold] || ''}) per layer (softmax over the option letters)`);
    v.lens.forEach((p, layer) => {
      const fill = WB.el('span', {class: 'barfill'});
      fill.style.width = `${Math.round(100 * (p || 0))}%`;
      lens.append(WB.el('div', {class: 'bar', 'data-layer': layer, 'data-prob': p},
        WB.el('span', {class: 'barlabel'}, `L${layer}`), WB.el('span', {class: 'bartrack'}, fill), WB.el('span', {}, WB.fmt(p, 3))));
    });
    out.push(lens);
  }

  const grids = Object.entries(run.grid || {});
  if (grids.length) {
    const grid = WB.section('head-grid', 'accuracy of each head over all items (rows: layers, columns: heads; \u00d7 degenerate); outlined: kept per item, click one');
    for (const [m, table] of grids) {
      const head = WB.el('tr', {}, WB.el('th', {}, m), ...table[0].map((_, hh) => WB.el('th', {}, `H${hh}`)));
      const body = table.map((cells, layer) => WB.el('tr', {}, WB.el('th', {}, `L${layer}`), ...cells.map((acc, hh) => {
        const idx = run.heads.findIndex(x => x[0] === layer && x[1] === hh);
        const cls = ['cell', idx >= 0 ? 'kept' : '', layer === l && hh === h ? 'current' : '',
          Object.values(run.chosen || {}).some(x => x[0] === layer && x[1] === hh) ? 'chosen' : ''].join(' ').trim();
        const degenerate = ((run.degenerate || {})[m] || [])[layer]?.[hh] === true;
        const td = WB.el('td', {class: cls + (degenerate ? ' degenerate' : ''), 'data-head': `${layer}.${hh}`, 'data-method': m,
          title: `L${layer}.H${hh}: ${WB.fmt(acc)}` + (degenerate ? ' (degenerate: tied on most validation items, never selected)' : '')},
          degenerate ? '\u00d7' : acc === null ? '' : acc.toFixed(2));
        td.style.background = WB.shade(acc === null || degenerate ? 0 : acc, 1, '40, 90, 200');
        td.addEventListener('click', () => {
          if (idx >= 0) { state.head = idx; state.pick = null; } else { state.pick = [layer, hh]; }
          redraw();
        });
        return td;
      })));
      grid.append(WB.el('table', {class: 'grid'}, WB.el('thead', {}, head), WB.el('tbody', {}, ...body)));
    }
    out.push(grid);
  }
  return out;
};
