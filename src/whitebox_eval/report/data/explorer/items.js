// The item table: filter by each method's correctness, by disagreement and by search; sort by any number.
WB.itemTable = function (run, state, onSelect) {
  const root = WB.el('div', {'data-view': 'items', class: 'view items'});
  const controls = WB.el('div', {class: 'controls'});
  const filters = {};
  for (const m of run.methods) {
    const sel = WB.el('select', {'data-filter': m},
      WB.el('option', {value: 'any'}, 'any'), WB.el('option', {value: 'correct'}, 'correct'),
      WB.el('option', {value: 'incorrect'}, 'incorrect'));
    filters[m] = sel;
    controls.append(WB.el('label', {}, m + ' ', sel));
  }
  const disagree = WB.el('input', {type: 'checkbox', 'data-filter': 'disagree'});
  controls.append(WB.el('label', {}, disagree, ' methods disagree'));
  const search = WB.el('input', {type: 'search', 'data-filter': 'search', placeholder: 'search id or text'});
  controls.append(search);
  const numbers = [];
  for (const it of run.items) for (const k of Object.keys(it.num)) if (!numbers.includes(k)) numbers.push(k);
  const sort = WB.el('select', {'data-sort': ''}, WB.el('option', {value: ''}, 'run order'),
    ...numbers.flatMap(k => [WB.el('option', {value: 'desc:' + k}, k + ' \u2193'),
                             WB.el('option', {value: 'asc:' + k}, k + ' \u2191')]));
  controls.append(WB.el('label', {}, 'sort ', sort));
  const count = WB.el('span', {class: 'count'});
  controls.append(count);
  const body = WB.el('tbody');
  const head = WB.el('tr', {}, WB.el('th', {}, 'id'), WB.el('th', {}, 'gold'),
    ...run.methods.map(m => WB.el('th', {}, m)), WB.el('th', {}, 'text'));
  root.append(controls, WB.el('div', {class: 'scroll'}, WB.el('table', {class: 'itemtable'}, WB.el('thead', {}, head), body)));

  function visible() {
    const q = search.value.trim().toLowerCase();
    let rows = run.items.map((it, i) => [it, i]).filter(([it]) => {
      for (const m of run.methods) {
        const want = filters[m].value;
        if (want === 'correct' && it.ok[m] !== true) return false;
        if (want === 'incorrect' && it.ok[m] !== false) return false;
      }
      if (disagree.checked && new Set((run.compare || run.methods).map(m => it.pred[m])).size < 2) return false;
      return !q || it.id.toLowerCase().includes(q) || it.text.toLowerCase().includes(q);
    });
    if (sort.value) {
      const dir = sort.value.slice(0, sort.value.indexOf(':'));
      const key = sort.value.slice(dir.length + 1);
      const sign = dir === 'asc' ? 1 : -1;
      const val = it => (it.num[key] === null || it.num[key] === undefined) ? null : it.num[key];
      rows = rows.slice().sort((a, b) => {
        const x = val(a[0]), y = val(b[0]);
        if (x === null) return y === null ? 0 : 1;
        if (y === null) return -1;
        return sign * (x - y);
      });
    }
    return rows;
  }

  function draw() {
    const rows = visible();
    body.replaceChildren();
    for (const [it, i] of rows.slice(0, 1000)) {
      const tr = WB.el('tr', {'data-item': i, class: i === state.item ? 'selected' : null},
        WB.el('td', {class: 'id'}, it.id), WB.el('td', {}, WB.fmt(it.gold)),
        ...run.methods.map(m => WB.el('td', {class: WB.mark(it.ok[m])}, WB.fmt(it.pred[m]))),
        WB.el('td', {class: 'text'}, it.text.slice(0, 160)));
      tr.addEventListener('click', () => { state.item = i; draw(); onSelect(i); });
      body.append(tr);
    }
    count.textContent = `${rows.length} of ${run.items.length} items` + (rows.length > 1000 ? ' (first 1000 listed)' : '');
  }

  for (const c of [...Object.values(filters), disagree, sort]) c.addEventListener('change', draw);
  search.addEventListener('input', draw);
  draw();
  return root;
};

// What every item shows: its id, gold, text and each method's prediction.
WB.itemSummary = function (run, it) {
  return WB.el('div', {class: 'summary'},
    WB.el('p', {}, WB.el('b', {}, 'item '), WB.el('span', {class: 'id'}, it.id), '  gold: ',
      WB.el('span', {class: 'gold'}, WB.fmt(it.gold))),
    WB.el('p', {}, ...run.methods.map(m => WB.el('span', {class: 'chip ' + WB.mark(it.ok[m])}, `${m}: ${WB.fmt(it.pred[m])}`))),
    WB.el('pre', {class: 'itemtext'}, it.text));
};
