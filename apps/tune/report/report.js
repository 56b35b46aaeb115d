// Draws the charts of `tune report` from the study's JSON blob (#tune-data) with Chart.js.
// Large studies stay responsive: no animation, pre-parsed data (parsing: false), learning
// curves and timeline bars merged into a few datasets, and a paginated table.
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('tune-data').textContent);
  const trials = data.trials;
  const main = document.getElementById('report');
  const COLORS = {
    complete: '#1f77b4', pruned: '#a0a0a0', oom: '#d62728', predicted: '#ff7f0e',
    failed: '#8c564b', interrupted: '#9467bd', timeout: '#e377c2', stale: '#7f7f7f',
    running: '#2ca02c', waiting: '#bcbd22'
  };
  const LABELS = {
    complete: 'COMPLETE', pruned: 'PRUNED by the pruner', oom: 'OOM at run time',
    predicted: 'predicted misfit (not run)', failed: 'FAIL', interrupted: 'interrupted',
    timeout: 'timed out', stale: 'stale', running: 'RUNNING', waiting: 'WAITING'
  };
  const charts = [];
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  Chart.defaults.normalized = true;

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    Object.assign(e, attrs || {});
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function section(title, note) {
    const s = el('section');
    s.appendChild(el('h2', {}, title));
    if (note) s.appendChild(el('p', { className: 'note' }, note));
    main.appendChild(s);
    return s;
  }
  function canvasIn(parent, id, title) {
    const box = el('div', { className: 'chart' });
    if (title) parent.appendChild(el('h3', {}, title));
    const c = el('canvas', { id: id });
    box.appendChild(c);
    parent.appendChild(box);
    return c;
  }
  function emptyNote(parent, text) { parent.appendChild(el('p', { className: 'empty' }, text)); }
  function draw(canvas, config) {
    config.options = Object.assign({ parsing: false }, config.options || {});
    charts.push(new Chart(canvas, config));
  }
  function axis(title, extra) { return Object.assign({ type: 'linear', title: { display: true, text: title } }, extra || {}); }
  // A linear axis over the indices 0..n-1 of `labels`: one tick per label, each labelled, none
  // skipped (a category axis cannot offset the points of several datasets side by side).
  function indexAxis(title, labels) {
    return axis(title, { min: -0.5, max: labels.length - 0.5,
      afterBuildTicks: scale => { scale.ticks = labels.map((_, i) => ({ value: i })); },
      ticks: { autoSkip: false, callback: v => labels[v] } });
  }
  function pointLabel(ctx) { return 'trial ' + ctx.raw.n + ': ' + ctx.raw.x + ', ' + ctx.raw.y; }
  const value = t => (t.values.length ? t.values[0] : null);
  const minimize = data.directions[0] !== 'MAXIMIZE';
  const better = (a, b) => (minimize ? a < b : a > b);
  const complete = trials.filter(t => t.state === 'COMPLETE' && value(t) !== null);

  function history() {
    const s = section('Optimisation history',
      'Objective value of each COMPLETE trial and the best value so far' +
      (data.directions.length > 1 ? ' (first objective of ' + data.directions.length + ')' : '') + '.');
    if (!complete.length) return emptyNote(s, 'No COMPLETE trial yet.');
    const points = complete.map(t => ({ x: t.number, y: value(t), n: t.number }));
    const best = [];
    let b = null;
    for (const p of points) { if (b === null || better(p.y, b)) b = p.y; best.push({ x: p.x, y: b, n: p.n }); }
    draw(canvasIn(s, 'chart-history'), {
      type: 'scatter',
      data: { datasets: [
        { label: 'objective value', data: points, backgroundColor: COLORS.complete, pointRadius: 2 },
        { label: 'best so far', data: best, type: 'line', borderColor: '#d62728', pointRadius: 0, stepped: true }
      ] },
      options: { scales: { x: axis('trial'), y: axis('objective value') },
        plugins: { tooltip: { callbacks: { label: pointLabel } } } }
    });
  }

  // Several objectives: the COMPLETE trials with the Pareto front highlighted (2 objectives: a
  // scatter; more: parallel coordinates, each objective scaled to [0, 1] by its range), and the
  // hypervolume of the trials so far.
  function pareto() {
    const p = data.pareto;
    if (!p) return;
    const k = data.directions.length;
    const names = p.names.length === k ? p.names : data.directions.map((d, i) => 'objective ' + i);
    const s = section('Pareto front',
      p.front.length + ' of ' + complete.length + ' COMPLETE trials are on the front (no other ' +
      'trial is at least as good in every objective and better in one): ' +
      names.map((n, i) => n + ' (' + data.directions[i].toLowerCase() + ')').join(', ') + '.');
    if (!complete.length) return emptyNote(s, 'No COMPLETE trial yet.');
    const onFront = new Set(p.front);
    const rest = complete.filter(t => !onFront.has(t.number));
    const front = complete.filter(t => onFront.has(t.number));
    if (k === 2) {
      const pt = t => ({ x: t.values[0], y: t.values[1], n: t.number });
      const line = front.map(pt).sort((a, b) => a.x - b.x);
      draw(canvasIn(s, 'chart-pareto'), {
        type: 'scatter',
        data: { datasets: [
          { label: 'dominated trials', data: rest.map(pt), backgroundColor: COLORS.pruned, pointRadius: 2 },
          { label: 'Pareto front', data: line, backgroundColor: COLORS.oom, borderColor: COLORS.oom,
            pointRadius: 4, showLine: true, stepped: false }
        ] },
        options: { scales: { x: axis(names[0]), y: axis(names[1]) },
          plugins: { tooltip: { callbacks: { label: pointLabel } } } }
      });
    } else {
      const lo = names.map((_, i) => Math.min(...complete.map(t => t.values[i])));
      const hi = names.map((_, i) => Math.max(...complete.map(t => t.values[i])));
      const scaled = t => t.values.map((v, i) => ({ x: i, y: hi[i] > lo[i] ? (v - lo[i]) / (hi[i] - lo[i]) : 0.5, n: t.number }));
      const lines = (ts, colour, width) => ts.map(t => ({ data: scaled(t), borderColor: colour,
        borderWidth: width, pointRadius: 0, showLine: true, label: 'trial ' + t.number }));
      draw(canvasIn(s, 'chart-pareto'), {
        type: 'scatter',
        data: { datasets: lines(rest, COLORS.pruned, 0.5).concat(lines(front, COLORS.oom, 2)) },
        options: { scales: { x: indexAxis('objective', names), y: axis('scaled value (0 = lowest, 1 = highest)', { min: 0, max: 1 }) },
          plugins: { legend: { display: false } } }
      });
    }
    if (!p.hypervolume.length) return;
    draw(canvasIn(s, 'chart-hypervolume', 'Hypervolume'), {
      type: 'scatter',
      data: { datasets: [{ label: 'hypervolume of the COMPLETE trials so far', data: p.hypervolume.map(([n, v]) => ({ x: n, y: v, n: n })),
        borderColor: COLORS.complete, backgroundColor: COLORS.complete, showLine: true, pointRadius: 0, stepped: true }] },
      options: { scales: { x: axis('trial'), y: axis('hypervolume (reference ' + p.reference.map(v => +v.toPrecision(4)).join(', ') + ')') } }
    });
  }

  // One dataset per kind of trial; NaN points separate the curves.
  function intermediate() {
    const s = section('Intermediate values', 'Learning curves reported with trial.report(): COMPLETE trials in blue, PRUNED and other trials greyed.');
    const kinds = { COMPLETE: [], other: [] };
    let n = 0;
    for (const t of trials) {
      if (!t.intermediate.length) continue;
      const into = kinds[t.state === 'COMPLETE' ? 'COMPLETE' : 'other'];
      for (const [step, v] of t.intermediate) into.push({ x: step, y: v === null ? NaN : v, n: t.number });
      into.push({ x: NaN, y: NaN, n: t.number });
      n++;
    }
    if (!n) return emptyNote(s, 'No trial reported intermediate values.');
    draw(canvasIn(s, 'chart-intermediate'), {
      type: 'line',
      data: { datasets: [
        { label: 'PRUNED / other', data: kinds.other, borderColor: 'rgba(150,150,150,0.35)', borderWidth: 1, pointRadius: 0 },
        { label: 'COMPLETE', data: kinds.COMPLETE, borderColor: 'rgba(31,119,180,0.6)', borderWidth: 1, pointRadius: 0 }
      ] },
      options: { spanGaps: false, scales: { x: axis('step'), y: axis('intermediate value') },
        plugins: { tooltip: { callbacks: { label: pointLabel } } } }
    });
  }

  function importance() {
    const imp = data.importance;
    const s = section('Hyperparameter importances', 'Method: ' + imp.method + '.');
    if (!imp.params.length) return emptyNote(s, 'Needs at least three COMPLETE trials of a single-objective study.');
    const p = imp.params;
    draw(canvasIn(s, 'chart-importance'), {
      type: 'bar',
      data: { labels: p.map(q => q.name), datasets: [{ label: 'importance', backgroundColor: COLORS.complete,
        data: p.map((q, i) => ({ x: q.importance, y: i })) }] },
      options: { indexAxis: 'y', scales: { x: axis('importance (sum 1)'), y: { type: 'category' } } }
    });
  }

  function distributionOf(name) { return (data.distributions || {})[name] || null; }

  function slices() {
    const s = section('Slice plots', 'Objective value against each parameter, one point per COMPLETE trial.');
    if (!complete.length) return emptyNote(s, 'No COMPLETE trial yet.');
    const grid = el('div', { className: 'grid' });
    s.appendChild(grid);
    const names = Object.keys(data.distributions || {}).sort();
    names.forEach((name, i) => {
      const d = distributionOf(name);
      const choices = d.name === 'CategoricalDistribution' ? d.attributes.choices.map(String) : null;
      const pts = complete.filter(t => name in t.params).map(t => ({
        x: choices ? choices.indexOf(String(t.params[name])) : t.params[name], y: value(t), n: t.number }));
      const cell = el('div');
      grid.appendChild(cell);
      const x = choices ? indexAxis(name, choices)
        : axis(name, { type: d.attributes.log ? 'logarithmic' : 'linear' });
      draw(canvasIn(cell, 'chart-slice-' + i, name), {
        type: 'scatter',
        data: { datasets: [{ label: name, data: pts, backgroundColor: COLORS.complete, pointRadius: 2 }] },
        options: { scales: { x: x, y: axis('objective value') }, plugins: { legend: { display: false },
          tooltip: { callbacks: { label: pointLabel } } } }
      });
    });
  }

  // Batch size x sequence length, one chart per model: how many trials of each outcome.
  function oomMap() {
    const s = section('OOM map', 'Batch size against sequence length per model: COMPLETE, PRUNED by the pruner, OOM at run time and predicted misfits (the memory guard did not run them). Bigger bubbles: more trials.');
    const cats = ['complete', 'pruned', 'predicted', 'oom'];
    const byModel = {};
    for (const t of trials) {
      const m = t.memory || {};
      const batch = t.params.batch_size !== undefined ? t.params.batch_size : m.batch_size;
      const length = t.params.max_length !== undefined ? t.params.max_length : m.max_length;
      if (!batch || !length || cats.indexOf(t.category) < 0) continue;
      const model = String(t.params.model !== undefined ? t.params.model : (m.model || 'all trials'));
      (byModel[model] = byModel[model] || []).push({ batch: Number(batch), length: Number(length), c: t.category });
    }
    const models = Object.keys(byModel).sort();
    if (!models.length) return emptyNote(s, 'No trial has both a batch size and a sequence length (params batch_size and max_length, or the memory attribute).');
    const legend = el('div', { className: 'legend', id: 'oom-legend' });
    for (const c of cats) {
      const item = el('span');
      item.appendChild(el('i', { style: 'background:' + COLORS[c] }));
      item.appendChild(document.createTextNode(LABELS[c]));
      legend.appendChild(item);
    }
    s.appendChild(legend);
    const grid = el('div', { className: 'grid' });
    s.appendChild(grid);
    models.forEach((model, i) => {
      const rows = byModel[model];
      const bs = [...new Set(rows.map(r => r.batch))].sort((a, b) => a - b);
      const ls = [...new Set(rows.map(r => r.length))].sort((a, b) => a - b);
      const counts = {};
      for (const r of rows) { const k = r.c + ' ' + bs.indexOf(r.batch) + ' ' + ls.indexOf(r.length); counts[k] = (counts[k] || 0) + 1; }
      const datasets = cats.map((c, ci) => ({
        label: LABELS[c], backgroundColor: COLORS[c] + 'b0', borderColor: COLORS[c],
        data: Object.keys(counts).filter(k => k.split(' ')[0] === c).map(k => {
          const [, bi, li] = k.split(' ').map(Number);
          return { x: bi + (ci - 1.5) * 0.15, y: li, r: Math.min(12, 3 + 2 * Math.sqrt(counts[k])), n: counts[k] };
        })
      }));
      const cell = el('div');
      grid.appendChild(cell);
      draw(canvasIn(cell, 'chart-oom-' + i, model), {
        type: 'bubble', data: { datasets: datasets },
        options: { scales: {
          x: indexAxis('batch size', bs.map(String)),
          y: indexAxis('sequence length', ls.map(String)) },
          plugins: { legend: { display: false },  // one legend for the section, above
            tooltip: { callbacks: { label: ctx => ctx.dataset.label + ': ' + ctx.raw.n + ' trial(s)' } } } }
      });
    });
  }

  function memory() {
    const s = section('Predicted vs measured peak memory', 'GiB; points on the dashed y = x line are exact, above it over-estimates, below it under-estimates.');
    const gib = v => v / 1073741824;
    const est = [], pred = [];
    for (const t of trials) {
      const m = t.memory;
      if (!m || !m.peak) continue;
      // A device peak's counterpart (MeasuredDevicePeak): on CUDA reserved peak + context.
      const peak = m.context >= 0 && m.peak_reserved >= 0 ? m.peak_reserved + m.context : m.peak;
      if (m.estimate) est.push({ x: gib(peak), y: gib(m.estimate), n: t.number });
      if (m.predicted) pred.push({ x: gib(peak), y: gib(m.predicted), n: t.number });
    }
    if (!est.length && !pred.length) return emptyNote(s, 'No trial measured its peak memory (the memory user attribute with a peak).');
    const all = est.concat(pred).flatMap(p => [p.x, p.y]);
    const lo = Math.min(...all), hi = Math.max(...all);
    draw(canvasIn(s, 'chart-memory'), {
      type: 'scatter',
      data: { datasets: [
        { label: 'estimate', data: est, backgroundColor: COLORS.complete, pointRadius: 3 },
        { label: "guard's prediction", data: pred, backgroundColor: COLORS.predicted, pointRadius: 3 },
        { label: 'y = x', type: 'line', data: [{ x: lo, y: lo }, { x: hi, y: hi }], borderColor: '#444', borderDash: [6, 4], pointRadius: 0 }
      ] },
      options: { scales: { x: axis('measured peak (GiB)'), y: axis('predicted (GiB)') },
        plugins: { tooltip: { callbacks: { label: pointLabel } } } }
    });
  }

  // Models outside the catalog (a command's memory.model; a TorchScript model's probes): the
  // peaks measured and the fit the memory guard predicts with; no section without such a model.
  function fits() {
    const list = data.memory_fits || [];
    if (!list.length) return;
    const s = section('Measured memory fits', 'Models outside the catalog: peak = max(floor, a + b·B·T + c·B·T²) fitted to the peaks the trials measured, or for a TorchScript model to its probes (MiB); the held-out shape checks the fit, whose error sets the margin.');
    const mib = v => (v / 1048576).toFixed(1);
    for (const m of list) {
      s.appendChild(el('h3', {}, (m.source === 'probes' ? 'TorchScript model ' : '') + m.model + ' (' + m.precision + ')'));
      s.appendChild(el('p', {}, m.fit ? m.text + '; ' + m.fitted_trials + ' trial(s) predicted by the fit, ' + m.oom_after_fit + ' out of memory at run time'
                                        : 'No fit yet: it needs 4 measured shapes with 2 values of max_length.'));
      const t = el('table', { className: 'fit-points' });
      const head = el('tr');
      for (const h of ['batch size', 'max length', 'measured', 'fitted']) head.appendChild(el('th', {}, h));
      t.appendChild(head);
      for (const p of m.points) {
        const row = el('tr');
        const fitted = m.fit ? Math.max(m.fit.floor || 0, m.fit.a + m.fit.b * p.batch_size * p.max_length + m.fit.c * p.batch_size * p.max_length * p.max_length) : null;
        for (const v of [p.batch_size, p.max_length, mib(p.peak), fitted === null ? '-' : mib(fitted)]) row.appendChild(el('td', {}, String(v)));
        t.appendChild(row);
      }
      s.appendChild(t);
    }
  }

  // One horizontal bar per trial: waiting (queued to started) in light grey, running coloured
  // by outcome. Bars are line segments separated by NaN points, a dataset per outcome. With
  // several cards (--jobs) the trials are grouped by the card they ran on, one block per card.
  function timeline() {
    const cardOf = t => (t.schedule && t.schedule.card !== undefined ? t.schedule.card : null);
    const byCard = trials.some(t => cardOf(t) !== null);
    const s = section('Trial timeline', 'One bar per trial over time (seconds since the first start): light grey while queued (--jobs), coloured while running. Overlapping bars ran concurrently' + (byCard ? ' on the same card; trials are grouped by the card they ran on.' : '.'));
    const order = trials.slice();
    if (byCard) order.sort((a, b) => String(cardOf(a) || '').localeCompare(String(cardOf(b) || '')) || a.number - b.number);
    const rowLabel = {};
    const wait = [], runs = {};
    let n = 0;
    order.forEach((t, i) => {
      const sc = t.schedule || {};
      const start = sc.started !== undefined ? sc.started : t.start;
      const end = sc.ended !== undefined ? sc.ended : t.complete;
      if (start === null || start === undefined || end === null || end === undefined) return;
      const y = byCard ? i : t.number;
      rowLabel[y] = byCard ? (cardOf(t) || 'no card') + ' · ' + t.number : String(t.number);
      const p = (x) => ({ x: x, y: y, n: t.number, card: cardOf(t) });
      if (sc.queued !== undefined && sc.queued < start) wait.push(p(sc.queued), p(start), { x: NaN, y: NaN });
      (runs[t.category] = runs[t.category] || []).push(p(start), p(end), { x: NaN, y: NaN });
      n++;
    });
    if (!n) return emptyNote(s, 'No finished trial has start and end times.');
    const width = Math.max(1, Math.min(6, Math.floor(500 / n)));
    const datasets = [{ label: 'queued', data: wait, borderColor: '#dddddd', borderWidth: width, pointRadius: 0 }];
    for (const c of Object.keys(runs)) datasets.push({ label: LABELS[c] || c, data: runs[c], borderColor: COLORS[c] || '#000', borderWidth: width, pointRadius: 0 });
    draw(canvasIn(s, 'chart-timeline'), {
      type: 'line', data: { datasets: datasets },
      options: { spanGaps: false, scales: { x: axis('seconds since the first start'), y: axis(byCard ? 'card · trial' : 'trial', byCard ? { reverse: true, ticks: { callback: v => (rowLabel[v] !== undefined ? rowLabel[v] : '') } } : { reverse: true }) },
        plugins: { tooltip: { callbacks: { label: ctx => 'trial ' + ctx.raw.n + (ctx.raw.card ? ' on ' + ctx.raw.card : '') + ' at ' + ctx.raw.x.toFixed(1) + ' s' } } } }
    });
  }

  // A sortable, paginated table: a click on a header sorts by it (again: the other way).
  function table() {
    const s = section('Trials', 'Click a column header to sort; ' + trials.length + ' trial(s), 100 per page.');
    const names = Object.keys(data.distributions || {}).sort();
    // A train study's metrics, of each trial's best evaluation (the study's metric first).
    const metricSet = new Set();
    for (const t of trials) for (const k of Object.keys(t.metrics || {})) metricSet.add(k);
    const metricNames = [...metricSet].sort((a, b) => (a === data.metric ? -1 : b === data.metric ? 1 : a.localeCompare(b)));
    const cols = [
      { name: 'number', get: t => t.number }, { name: 'state', get: t => t.state },
      { name: 'outcome', get: t => LABELS[t.category] || t.category },
      { name: 'value', get: t => (t.values.length ? t.values.join(', ') : null), key: t => value(t) },
      { name: 'duration (s)', get: t => (t.start !== null && t.complete !== null ? +(t.complete - t.start).toFixed(2) : null) }
    ].concat(metricNames.map(n => ({ name: n, get: t => (t.metrics && t.metrics[n] !== undefined && t.metrics[n] !== null ? +t.metrics[n].toFixed(4) : null) })))
      .concat(names.map(n => ({ name: n, get: t => (n in t.params ? t.params[n] : null) })));
    const wrap = el('div', { className: 'table-wrap' });
    const tbl = el('table', { id: 'trial-table' });
    const head = el('tr');
    const body = el('tbody');
    const pager = el('div', { className: 'pager' });
    const prev = el('button', {}, 'previous'), next = el('button', {}, 'next'), info = el('span');
    pager.append(prev, next, info);
    tbl.appendChild(el('thead')).appendChild(head);
    tbl.appendChild(body);
    wrap.appendChild(tbl);
    s.append(pager, wrap);
    let rows = trials.slice(), page = 0, sortCol = -1, asc = true;
    const pages = () => Math.max(1, Math.ceil(rows.length / 100));
    function render() {
      body.textContent = '';
      for (const t of rows.slice(page * 100, page * 100 + 100)) {
        const tr = el('tr');
        for (const c of cols) { const v = c.get(t); tr.appendChild(el('td', {}, v === null ? '' : String(v))); }
        body.appendChild(tr);
      }
      info.textContent = 'page ' + (page + 1) + ' of ' + pages();
    }
    function compare(a, b) {
      if (a === b) return 0;
      if (a === null || a === undefined) return 1;
      if (b === null || b === undefined) return -1;
      return (typeof a === 'number' && typeof b === 'number') ? a - b : String(a).localeCompare(String(b));
    }
    cols.forEach((c, i) => {
      const th = el('th', {}, c.name);
      th.addEventListener('click', () => {
        asc = sortCol === i ? !asc : true;
        sortCol = i;
        const key = c.key || c.get;
        rows.sort((a, b) => { const r = compare(key(a), key(b)); return asc || key(a) === null || key(b) === null ? r : -r; });
        head.querySelectorAll('th').forEach(h => (h.className = ''));
        th.className = asc ? 'asc' : 'desc';
        page = 0;
        render();
      });
      head.appendChild(th);
    });
    prev.addEventListener('click', () => { if (page > 0) { page--; render(); } });
    next.addEventListener('click', () => { if (page + 1 < pages()) { page++; render(); } });
    render();
  }

  // With #selftest in the address: checks every canvas has painted pixels and that a click on
  // the "value" header sorts the table, and writes the result as JSON into #selftest.
  function selftest(renderMs, scriptStart, sectionMs) {
    const result = { render_ms: renderMs, script_start_ms: scriptStart, section_ms: sectionMs,
      trials: trials.length, charts: [], sorted: null };
    for (const c of document.querySelectorAll('canvas')) {
      const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let painted = 0, coloured = 0;  // any pixel; pixels of a colour, not grey (axes, text)
      for (let i = 0; i < px.length; i += 4) {
        painted += px[i + 3] > 0;
        coloured += px[i + 3] > 0 && Math.abs(px[i] - px[i + 1]) + Math.abs(px[i + 1] - px[i + 2]) > 60;
      }
      result.charts.push({ id: c.id, width: c.width, height: c.height, painted: painted, coloured: coloured });
    }
    // Tick labels of the index axes (slice plots of categorical parameters, the OOM map) and which
    // charts draw their own legend.
    result.ticks = {};
    result.legends = [];
    for (const chart of charts) {
      const id = chart.canvas.id;
      if (chart.options.plugins.legend.display !== false) result.legends.push(id);
      const labels = axis => (axis && axis.ticks ? axis.ticks.map(t => t.label) : []);
      result.ticks[id] = { x: labels(chart.scales.x), y: labels(chart.scales.y) };
    }
    result.oom_legend = document.querySelectorAll('#oom-legend span').length;
    const th = [...document.querySelectorAll('#trial-table th')].find(h => h.textContent === 'value');
    const column = () => [...document.querySelectorAll('#trial-table tbody tr')].map(r => r.children[3].textContent)
      .filter(v => v !== '').map(v => parseFloat(v));
    const clicked = performance.now();
    th.dispatchEvent(new MouseEvent('click', { bubbles: true }));
    result.sort_ms = performance.now() - clicked;
    const up = column();
    th.dispatchEvent(new MouseEvent('click', { bubbles: true }));
    const down = column();
    result.sorted = {
      ascending: up.length > 1 && up.every((v, i) => i === 0 || up[i - 1] <= v),
      descending: down.length > 1 && down.every((v, i) => i === 0 || down[i - 1] >= v),
      first_ascending: up[0], first_descending: down[0]
    };
    document.body.appendChild(el('pre', { id: 'selftest' }, JSON.stringify(result)));
  }

  const title = 'Study ' + data.study;
  document.getElementById('title').textContent = title;
  document.getElementById('subtitle').textContent = trials.length + ' trial(s), ' + data.directions.join(', ') +
    (data.datetime_start ? ', first started ' + data.datetime_start : '');
  const scriptStart = performance.now(), sectionMs = {};
  for (const f of [history, pareto, intermediate, importance, slices, oomMap, memory, fits, timeline, table]) {
    const t = performance.now();
    f();
    sectionMs[f.name] = Math.round(performance.now() - t);
  }
  const renderMs = performance.now();
  document.body.dataset.renderMs = renderMs.toFixed(1);
  document.getElementById('footer').textContent = 'Written by tune report; charts by Chart.js ' + Chart.version +
    '; rendered in ' + renderMs.toFixed(0) + ' ms.';
  if (location.hash === '#selftest') selftest(renderMs, scriptStart, sectionMs);
})();
