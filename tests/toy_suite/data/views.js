// The toy suite's view: the seeded draw behind each item.
WB.views.toy = function (run, state, it) {
  const view = WB.section('toy', 'the seeded draw');
  view.append(WB.el('p', {class: 'toy-draw'}, WB.fmt(it.toy.draw, 3)));
  return [view];
};
