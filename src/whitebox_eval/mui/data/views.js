// MUI (paper 001): key neurons / SAE features per layer and per response token.
WB.views.mui = function (run, state, it) {
  const m = it.mui;
  if (!m) return [];
  const out = run.answer_classes ? [WB.muiClasses(run.answer_classes, m.class)] : [];
  if (!m.per_layer) return out;
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
  out.push(view);
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

// The run's answer classes (rule 6): this response's class, each class's count, the off-format share.
WB.muiClasses = function (a, cls) {
  const view = WB.section('classes', 'answer classes: right, wrong or off-format (the check reads no answer)');
  if (a.not_classified) {
    view.append(WB.el('p', {class: 'note'}, `the responses cannot be classified: ${a.not_classified}`));
    return view;
  }
  const label = {right: 'right', wrong: 'wrong', off_format: 'off-format'};
  view.append(WB.el('p', {}, 'this response: ', WB.el('span', {class: 'chip ' + WB.mark(cls === 'right' ? true : cls === 'wrong' ? false : null),
      'data-class': cls || ''}, cls ? label[cls] : 'not classified')),
    WB.el('p', {'data-classes': ''}, `the run's ${a.n} responses: ` + Object.entries(a.counts).map(([c, k]) => `${k} ${label[c]}`).join(', ') +
      `; off-format share ${WB.fmt(a.off_format, 3)} [${WB.fmt(a.ci[0], 3)}, ${WB.fmt(a.ci[1], 3)}] (Wilson)` +
      (a.read_back ? '; classified from the texts as read (the run was written before the class)' : '')),
    WB.el('p', {class: 'note'}, a.definition || ''));
  return view;
};
