// GAR flips, span rollout, MUI neurons / features, formats.
WB.views.gar = function (run, state, it) {
  const g = it.gar;
  const arms = g.arms.map(a => WB.el('tr', {'data-stage': a.stage, class: a.ok === g.arms[0].ok ? null : 'flipped'},
    WB.el('th', {}, a.stage), WB.el('td', {class: WB.mark(a.ok)}, WB.fmt(a.pred)), WB.el('td', {}, WB.fmt(a.p)),
    WB.el('td', {}, a.stage === g.arms[0].stage ? '' : (a.ok === g.arms[0].ok ? 'no flip' : (a.ok ? 'flip: wrong \u2192 right' : 'flip: right \u2192 wrong')))));
  const view = WB.section('flips', `before (${g.arms[0].stage}) and after each intervention` + (run.pattern ? ` on ${run.pattern}` : ''),
    WB.el('table', {class: 'scores'}, WB.el('thead', {}, WB.el('tr', {}, WB.el('th', {}, 'stage'), WB.el('th', {}, 'prediction'),
      WB.el('th', {}, 'P(target)'), WB.el('th', {}, 'flip'))), WB.el('tbody', {}, ...arms)));
  if (g.matched) view.append(WB.el('p', {}, 'intervened heads\u2019 matched attention on this example: ',
    ...run.heads.map((hd, k) => WB.el('span', {class: 'chip', 'data-head': `${hd[0]}.${hd[1]}`}, `L${hd[0]}.H${hd[1]}: ${WB.fmt(g.matched[k])}`))));
  return [view];
};

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

WB.views.mui = function (run, state, it) {
  const m = it.mui;
  if (!m) return [];
  const kind = run.unit_kind === 'neuron' ? 'neurons' : 'features';
  const view = WB.section('neurons', `key ${kind} of this response: ${m.n}, per layer (the run's utilisation per layer in brackets); units as ${run.unit_label}`);
  m.per_layer.forEach((c, layer) => {
    const fill = WB.el('span', {class: 'barfill'});
    fill.style.width = `${Math.min(100, 100 * c / Math.max(1, ...m.per_layer))}%`;
    view.append(WB.el('div', {class: 'bar', 'data-layer': layer, 'data-count': c}, WB.el('span', {class: 'barlabel'}, `L${layer}`),
      WB.el('span', {class: 'bartrack'}, fill), WB.el('span', {}, `${c}` + (run.layer_mui ? `  (run: ${WB.fmt(run.layer_mui[layer], 3)})` : ''))));
  });
  view.append(WB.el('p', {class: 'units'}, ...m.units.map(u => WB.el('span', {class: 'chip', 'data-unit': u}, u))));
  if (m.tokens && m.token_keys) {
    const most = Math.max(1, ...m.token_keys);
    const detail = WB.el('div', {class: 'tokentop'});
    const tokens = WB.el('div', {class: 'tokens'});
    m.tokens.forEach((t, j) => {
      const span = WB.el('span', {class: 'tok', 'data-token': j, 'data-key-units': m.token_keys[j],
        title: `${m.token_keys[j]} key units peak here`}, t);
      span.style.background = WB.shade(m.token_keys[j], most, '30, 140, 60');
      span.addEventListener('click', () => {
        detail.replaceChildren(WB.el('table', {class: 'scores', 'data-token': j},
          WB.el('caption', {}, `token ${j}: ${JSON.stringify(t)}, its top units`),
          WB.el('tbody', {}, ...m.token_top[j].map(([u, x]) => WB.el('tr', {'data-unit': u},
            WB.el('th', {}, u), WB.el('td', {}, WB.fmt(x)))))));
      });
      tokens.append(span);
    });
    view.append(WB.el('p', {class: 'note'}, 'response tokens shaded by the key units that peak there (click one for its top units):'),
      tokens, detail);
  }
  const out = [view];
  if (run.features) {
    const f = WB.section('features', `the SAE features most items use (${run.unit_label}): the items that use them and the response tokens where they score highest; green: used by this item`);
    for (const feat of run.features) {
      f.append(WB.el('div', {class: 'feature' + (m.units.includes(feat.unit) ? ' used' : ''), 'data-unit': feat.unit},
        WB.el('b', {}, feat.unit), feat.link ? WB.el('a', {class: 'np', href: feat.link, target: '_blank', rel: 'noopener'},
          ` Neuronpedia ${feat.neuronpedia}`) : null, ` ${feat.n} items: `, ...feat.items.map(id => WB.el('span', {class: 'chip'}, id)),
        feat.tokens.length ? WB.el('div', {class: 'acts'}, 'activating tokens: ', ...feat.tokens.map(([x, t, id]) =>
          WB.el('span', {class: 'chip act', 'data-score': x, title: id}, `${JSON.stringify(t)} ${WB.fmt(x, 3)}`))) : null));
    }
    out.push(f);
  }
  return out;
};

WB.views.formats = function (run, state, it) {
  const f = it.formats;
  const view = WB.section('formats', `MCQ letters beside the free answers (answer: ${WB.fmt(f.answer)})`);
  view.append(WB.el('table', {class: 'scores'}, WB.el('tbody', {},
    ...Object.entries(f.mcq).map(([k, x]) => WB.el('tr', {'data-key': k}, WB.el('th', {}, `mcq ${k}`), WB.el('td', {}, WB.fmt(x)))),
    ...Object.entries(f.p_correct).map(([k, x]) => WB.el('tr', {'data-format': k}, WB.el('th', {}, `P(correct) ${k}`), WB.el('td', {}, WB.fmt(x)))))));
  for (const [fmt, gens] of Object.entries(f.generations)) {
    view.append(WB.el('div', {class: 'gens', 'data-format': fmt}, WB.el('b', {}, fmt),
      WB.el('ol', {}, ...gens.map(g => WB.el('li', {}, WB.el('pre', {}, g))))));
  }
  return [view];
};
