// GAR (paper 002): an intervention run's arms per example and the intervened heads' matched attention.
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
