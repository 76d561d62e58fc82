// Formats (paper 004): the MCQ letter probabilities beside the free answers, each answer's class.
WB.views.formats = function (run, state, it) {
  const f = it.formats;
  const view = WB.section('formats', `MCQ letters beside the free answers (answer: ${WB.fmt(f.answer)})`);
  view.append(WB.el('table', {class: 'scores'}, WB.el('tbody', {},
    ...Object.entries(f.mcq).map(([k, x]) => WB.el('tr', {'data-key': k}, WB.el('th', {}, `mcq ${k}`), WB.el('td', {}, WB.fmt(x)))),
    ...Object.entries(f.p_correct).map(([k, x]) => WB.el('tr', {'data-format': k}, WB.el('th', {}, `P(correct) ${k}`), WB.el('td', {}, WB.fmt(x)))))));
  for (const [fmt, gens] of Object.entries(f.generations)) {
    view.append(WB.el('div', {class: 'gens', 'data-format': fmt}, WB.el('b', {}, fmt),
      WB.el('ol', {}, ...gens.map((g, i) => WB.el('li', {'data-class': (f.classes || {})[fmt]?.[i] || ''},
        WB.el('i', {}, ((f.classes || {})[fmt]?.[i] || '').replace('_', '-')), WB.el('pre', {}, g))))));
  }
  return [view];
};
