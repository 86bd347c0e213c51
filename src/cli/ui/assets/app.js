// memctl ui: the page's state lives in its URL (so a view can be shared), the data comes
// from /api/* (read-only), and the view refreshes every 2 s while a run it shows is training.
// Charts are hand-written SVG: the page needs hover, zoom, log axes, smoothing, bands and PNG
// export, which a few hundred lines cover, and it stays one embedded file with nothing to vendor.
"use strict";

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
const FIELDS = ["where", "group_by", "sort", "columns", "ablation"];
const SVGNS = "http://www.w3.org/2000/svg";
const MOST_DRAWN = 10;
// A curve of at most this many points gets a marker on each (a one-point curve is otherwise
// a line of no length), as `memctl plot` draws them.
const MARKED_POINTS = 25;
const form = document.getElementById("view");
const $ = id => document.getElementById(id);
const url = new URLSearchParams(location.search);
const picked = new Set((url.get("picked") || "").split(",").filter(Boolean));
let shownRun = url.get("run");
// The pane under the curves: a run's record ("run") or the diff of the two picked ("diff").
// A refresh redraws the pane the user opened.
let pane = url.get("pane") === "diff" ? "diff" : "run";
// One chart per metric; "" is the metric `memctl plot` picks.
let charts = (url.get("metric") || "").split(",").map(m => m.trim());
// The x range zoomed into (shared by every chart), or null.
let zoom = parseZoom(url.get("zoom"));
let tab = url.get("tab") === "params" ? "params" : "curves";
let refresh = null;
// What the last load drew, so that zoom, smoothing and the y axis redraw without a fetch.
let lastSheet = null, lastCurves = [], lastScatter = null;
// Runs drawn (not grouped): their ids in drawing order, which gives each its colour.
let drawnIds = [];
// Grouped: each group's colour, by its label, the same in every chart.
let groupColors = new Map();

function parseZoom(text) {
  const z = (text || "").split(",").map(Number);
  return z.length === 2 && z.every(Number.isFinite) && z[1] > z[0] ? z : null;
}

function viewParams() {
  const p = new URLSearchParams();
  for (const name of FIELDS) {
    const v = form.elements[name].value.trim();
    if (v) p.set(name, v);
  }
  return p;
}

// Writes the whole state into the address bar (no reload).
function remember() {
  const p = viewParams();
  if (picked.size) p.set("picked", [...picked].join(","));
  if (charts.some(Boolean)) p.set("metric", charts.join(","));
  if ($("x").value !== "step") p.set("x", $("x").value);
  if ($("y").value !== "auto") p.set("y", $("y").value);
  if (smoothing() > 0) p.set("smooth", String(smoothing()));
  if (zoom) p.set("zoom", zoom.map(v => +v.toPrecision(6)).join(","));
  if (tab !== "curves") p.set("tab", tab);
  if ($("scatter-metric").value) p.set("smetric", $("scatter-metric").value);
  if (shownRun) p.set("run", shownRun);
  if (pane === "diff") p.set("pane", "diff");
  history.replaceState(null, "", "?" + p.toString() + location.hash);
}

function smoothing() {
  const w = Number($("smooth").value);
  return Number.isFinite(w) ? Math.min(Math.max(w, 0), 0.99) : 0;
}

// Three significant digits, as the CLI's tables print numbers.
function fmt(x) {
  if (x === null || x === undefined || Number.isNaN(x)) return "·";
  if (Number.isInteger(x)) return String(x);
  return Math.abs(x) >= 1e6 || Math.abs(x) < 1e-3 ? x.toExponential(2) : x.toPrecision(3);
}

// A value read off a chart: six significant digits.
function exact(x) {
  return Number.isInteger(x) ? String(x) : String(+x.toPrecision(6));
}

// Seconds as the CLI prints them: `53.0s`, `3m05s`, `1h02m`.
function duration(s) {
  if (s === null || s === undefined || Number.isNaN(s)) return "·";
  const two = n => String(Math.floor(n)).padStart(2, "0");
  if (s < 60) return `${s.toFixed(1)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${two(s % 60)}s`;
  return `${Math.floor(s / 3600)}h${two((s % 3600) / 60)}m`;
}

function cell(v, isDuration) {
  if (v === null || v === undefined) return "·";
  if (typeof v === "object" && "mean" in v) {
    // One run has no spread: `0.0970 (1)`, as `memctl runs --group-by` prints it.
    return v.std === null || v.std === undefined ? `${fmt(v.mean)} (${v.n})` : `${fmt(v.mean)} ± ${fmt(v.std)} (${v.n})`;
  }
  if (Array.isArray(v)) return v.join(", ");
  if (typeof v === "number") return isDuration ? duration(v) : fmt(v);
  return String(v);
}

// Fills a table from a sheet ({columns, rows, durations}); `onRow(row, tr)` decorates each row.
function fillTable(table, sheet, onHead, onRow) {
  const head = table.tHead, body = table.tBodies[0];
  const durations = new Set(sheet.durations || []);
  head.replaceChildren();
  body.replaceChildren();
  const tr = head.insertRow();
  for (const c of sheet.columns) {
    const th = document.createElement("th");
    th.textContent = c;
    if (onHead) th.onclick = () => onHead(c);
    tr.appendChild(th);
  }
  const rows = document.createDocumentFragment();
  for (const row of sheet.rows) {
    const r = document.createElement("tr");
    for (const c of sheet.columns) {
      const td = r.insertCell();
      td.textContent = cell(row[c], durations.has(c));
      if (c === "status") td.className = "status-" + row[c];
    }
    if (onRow) onRow(row, r);
    rows.appendChild(r);
  }
  body.appendChild(rows);
}

// The column picker: a box per column `memctl runs` shows by default; ticking one writes the
// `columns` field (and so the URL).
function offerColumns(available, shown, grouped) {
  const picker = $("column-picker"), list = $("column-list");
  picker.hidden = grouped || !available || !available.length;
  if (picker.hidden) return;
  const names = available.concat(shown.filter(c => !available.includes(c)));
  list.replaceChildren();
  for (const name of names) {
    if (name === "id") continue;
    const label = document.createElement("label");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.value = name;
    box.checked = shown.includes(name);
    box.onchange = () => {
      const ticked = [...list.querySelectorAll("input:checked")].map(b => b.value);
      form.elements.columns.value = ticked.join(",");
      show();
    };
    label.append(box, name);
    list.appendChild(label);
  }
}

function showError(message) {
  $("error").hidden = !message;
  $("error").textContent = message || "";
}

async function getJson(path, params) {
  const res = await fetch(path + "?" + params.toString());
  return { ok: res.ok, body: await res.json() };
}

function runColor(id) {
  const i = drawnIds.indexOf(String(id));
  return i < 0 ? null : COLORS[i % COLORS.length];
}

function groupColor(label) {
  const key = label.replace(/ \(\d+ runs?\)$/, "");
  if (!groupColors.has(key)) groupColors.set(key, COLORS[groupColors.size % COLORS.length]);
  return groupColors.get(key);
}

// A row's colour is its curve's: a bar at its left edge.
function paintRow(tr, color) {
  tr.style.setProperty("--curve", color || "transparent");
  tr.classList.toggle("drawn", Boolean(color));
}

async function loadRuns() {
  const params = viewParams();
  const grouped = params.has("group_by");
  // A group's curves need only the view: asked for beside the table, not after it.
  const groupCurves = grouped ? fetchAllCurves(params) : null;
  const { ok, body } = await getJson("/api/runs", params);
  if (!ok) { showError(body.error); return; }
  showError(null);
  lastSheet = body;
  drawnIds = grouped ? [] : (picked.size ? [...picked] : body.rows.map(r => String(r.id)).slice(0, MOST_DRAWN));
  groupColors = new Map();
  fillTable($("runs"), body, sortBy, (row, tr) => {
    if (grouped || row.id === undefined) return;
    const id = String(row.id);
    tr.dataset.id = id;
    paintRow(tr, runColor(id));
    if (picked.has(id)) tr.classList.add("picked");
    tr.onclick = () => { picked.has(id) ? picked.delete(id) : picked.add(id); shownRun = id; pane = "run"; show(); };
    // The id opens the run's own page.
    const link = document.createElement("a");
    link.href = "#/run/" + id;
    link.textContent = id;
    link.onclick = e => e.stopPropagation();
    tr.cells[0].replaceChildren(link);
  });
  offerColumns(body.available, body.columns, grouped);
  const n = body.matched;
  $("summary").textContent = `${n} ${grouped ? "group" : "run"}${n === 1 ? "" : "s"}` +
    (n > body.rows.length ? ` (the first ${body.rows.length} shown: filter or sort for others)` : "") +
    (body.running ? `; ${body.running} running, refreshing` : "");
  lastCurves = await (grouped ? groupCurves : fetchAllCurves(new URLSearchParams({ ids: drawnIds.join(",") })));
  drawCharts();
  if (grouped) paintGroupRows(body);
  if (tab === "params") await loadScatter(params);
  await loadAblation(params);
  $("diff").disabled = picked.size !== 2;
  if (pane === "diff" && picked.size === 2) await diff();
  else if (shownRun) await detail(shownRun);
  clearTimeout(refresh);
  if (body.running) refresh = setTimeout(loadRuns, 2000);
  // After the next frame is painted: what `cargo bench --bench dashboard` times.
  requestAnimationFrame(() => setTimeout(() => performance.mark("memctl:drawn")));
}

// A group's row takes its mean curve's colour (the curve's label starts with the row's keys).
function paintGroupRows(sheet) {
  const keys = viewParams().get("group_by").split(",").map(k => k.trim()).filter(Boolean);
  [...$("runs").tBodies[0].rows].forEach((tr, i) => {
    const row = sheet.rows[i];
    const label = keys.map(k => `${k}=${row[k] === null || row[k] === undefined ? "·" : row[k]}`).join(" ");
    paintRow(tr, groupColors.get(label) || null);
  });
}

function sortBy(column) {
  const s = form.elements.sort;
  s.value = s.value === "-" + column ? column : "-" + column;
  show();
}

async function loadAblation(params) {
  const ablationPane = $("ablation-pane");
  ablationPane.hidden = !params.has("ablation");
  if (ablationPane.hidden) return;
  const q = new URLSearchParams({ experiment: params.get("ablation") });
  if (params.has("where")) q.set("where", params.get("where"));
  const { ok, body } = await getJson("/api/ablation", q);
  if (!ok) { showError(body.error); return; }
  $("ablation-name").textContent = `${params.get("ablation")}, final ${body.metric}, mean ± std (n) over seeds`;
  fillTable($("ablation"), body);
}

// Each chart's curves, asked for side by side.
function fetchAllCurves(base) {
  return Promise.all(charts.map(metric => {
    const q = new URLSearchParams(base);
    if (metric) q.set("metric", metric);
    q.set("x", $("x").value);
    return getJson("/api/curves", q);
  }));
}

// The charts, from what the last load fetched.
function drawCharts() {
  const box = $("charts");
  box.replaceChildren();
  $("legend").replaceChildren();
  const legend = new Map();
  let note = "";
  lastCurves.forEach(({ ok, body }, i) => {
    const fig = chartFigure(box, i, body.metrics || body.known || [], ok ? body.metric : charts[i]);
    // A metric the runs lack comes back with those they have, to pick from.
    if (!ok) { fig.querySelector(".readout").textContent = body.error; return; }
    if (body.capped) note = `curves of the first ${body.drawn} of ${body.matched} runs`;
    const series = (body.series || []).map(s => ({
      ...s, color: s.id !== null && s.id !== undefined ? runColor(s.id) || "#555" : groupColor(s.label),
    }));
    for (const s of series) legend.set(s.label, s.color);
    fig.querySelector("svg").legend = series.map(s => [s.label, s.color]);
    draw(fig.querySelector("svg"), series, {
      xLabel: body.x || "training step", metric: body.metric, readout: fig.querySelector(".readout"),
    });
  });
  $("curves-note").textContent = note;
  fillLegend($("legend"), legend);
}

// A chart's frame: its metric to choose, PNG export, removal (all but the last chart).
function chartFigure(box, i, metrics, chosen) {
  const fig = document.createElement("figure");
  fig.className = "chart";
  const caption = document.createElement("figcaption");
  const select = document.createElement("select");
  select.className = "metric";
  for (const m of metrics) select.add(new Option(m, m, false, m === chosen));
  select.onchange = () => { charts[i] = select.value; show(); };
  const png = button("PNG", "png", "this chart as a PNG image", () => exportPng(fig.querySelector("svg"), chosen || "curves"));
  caption.append(select, " ", png);
  if (charts.length > 1) {
    caption.append(" ", button("×", "remove", "remove this chart", () => { charts.splice(i, 1); show(); }));
  }
  const svg = document.createElementNS(SVGNS, "svg");
  svg.setAttribute("class", "curves");
  svg.setAttribute("viewBox", "0 0 640 300");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `learning curves: ${chosen || ""}`);
  const readout = document.createElement("p");
  readout.className = "readout";
  fig.append(caption, svg, readout);
  box.appendChild(fig);
  return fig;
}

function button(text, className, title, onclick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = className;
  b.title = title;
  b.textContent = text;
  b.onclick = onclick;
  return b;
}

// An axis range that is never empty: a single step or value gets a span around it, so that
// its point is inside the chart and its tick labels differ.
// `share` of the value on each side (`atZero` around 0), as `memctl plot` pads them.
function span(lo, hi, share, atZero) {
  if (hi > lo) return [lo, hi];
  const half = lo === 0 ? atZero : Math.abs(lo) * share;
  return [lo - half, hi + half];
}

// Round tick values (steps of 1, 2 or 5 × 10^k) across [lo, hi], about `n` of them, and the
// decimals that tell their labels apart.
function ticks(lo, hi, n) {
  const raw = (hi - lo) / n;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw);
  const decimals = Math.max(0, -Math.floor(Math.log10(step)));
  const out = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(t);
  return { values: out, label: t => t.toFixed(decimals) };
}

// Ticks on a log axis over [lo, hi] (both > 0): each power of ten, and 2 and 5 times it when
// the range spans few decades.
function logTicks(lo, hi) {
  const out = [];
  const decades = Math.log10(hi) - Math.log10(lo);
  const mults = decades <= 2 ? [1, 2, 5] : [1];
  const every = decades > 8 ? Math.ceil(decades / 8) : 1;
  for (let k = Math.floor(Math.log10(lo)); k <= Math.ceil(Math.log10(hi)); k += every) {
    for (const m of mults) {
      const t = m * Math.pow(10, k);
      if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) out.push(t);
    }
  }
  return { values: out, label: t => (t >= 1e4 || t < 1e-3 ? t.toExponential(0) : String(+t.toPrecision(3))) };
}

// TensorBoard's smoothing: an exponential moving average with weight `w`, debiased so that the
// first points are not pulled towards 0.
function ema(points, w) {
  let last = 0, n = 0;
  return points.map(([x, y]) => {
    last = last * w + (1 - w) * y;
    n += 1;
    return [x, last / (1 - Math.pow(w, n))];
  });
}

function svgAdd(parent, tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  parent.appendChild(e);
  return e;
}

let clipCount = 0;

// One chart: `series` ({label, color, points, band}) on axes fitted to what is in view (or
// 0–1, or log); hover reads the nearest point, a drag across the plot zooms into that x
// range (every chart), a double click zooms out.
function draw(svg, series, { xLabel, metric, readout }) {
  svg.replaceChildren();
  const [W, H, L, B, T] = [640, 300, 58, 36, 20];
  const logY = $("y").value === "log";
  const w = smoothing();
  const finite = s => s.points.filter(p => Number.isFinite(p[1]) && (!logY || p[1] > 0));
  const inView = p => !zoom || (p[0] >= zoom[0] && p[0] <= zoom[1]);
  const pts = series.flatMap(s => finite(s).concat((s.band || []).flatMap(b => [[b[0], b[1]], [b[0], b[2]]])))
    .filter(p => Number.isFinite(p[1]) && (!logY || p[1] > 0));
  if (!pts.length) {
    svgAdd(svg, "text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, logY ? "no positive values to draw on a log axis" : "nothing to draw");
    return;
  }
  const xs = pts.map(p => p[0]);
  const [x0, x1] = zoom || span(Math.min(...xs), Math.max(...xs), 0.5, 1);
  const ys = (pts.some(inView) ? pts.filter(inView) : pts).map(p => p[1]);
  let [y0, y1] = span(Math.min(...ys), Math.max(...ys), 0.1, 0.5);
  // `0–1`: accuracies on a fixed axis, so 0.085 to 0.109 does not fill the height.
  if ($("y").value === "unit") [y0, y1] = [Math.min(0, y0), Math.max(1, y1)];
  if (logY) [y0, y1] = y1 / y0 < 10 ? [y0 / 1.5, y1 * 1.5] : [y0, y1];
  const ty = logY ? (y => Math.log10(y)) : (y => y);
  const X = x => L + (x - x0) / (x1 - x0) * (W - L - 10);
  const Y = y => H - B - (ty(y) - ty(y0)) / (ty(y1) - ty(y0)) * (H - B - T);
  const add = (tag, attrs, text) => svgAdd(svg, tag, attrs, text);
  const clip = "plot-clip-" + (++clipCount);
  const defs = add("defs", {});
  // Wide enough for the markers of the points on the edges.
  svgAdd(svgAdd(defs, "clipPath", { id: clip }), "rect", { x: L - 4, y: T - 4, width: W - L - 2, height: H - B - T + 8 });
  add("text", { class: "title", x: L, y: 14 }, metric || "");
  add("line", { class: "axis", x1: L, y1: H - B, x2: W - 10, y2: H - B });
  add("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B });
  const yt = logY ? logTicks(y0, y1) : ticks(y0, y1, 8), xt = ticks(x0, x1, 10);
  for (const t of yt.values) {
    add("line", { class: "grid", x1: L, y1: Y(t), x2: W - 10, y2: Y(t) });
    add("text", { class: "tick", x: L - 4, y: Y(t) + 4, "text-anchor": "end" }, yt.label(t));
  }
  for (const t of xt.values) {
    add("line", { class: "axis", x1: X(t), y1: H - B, x2: X(t), y2: H - B + 4 });
    add("text", { class: "tick", x: X(t), y: H - B + 17, "text-anchor": "middle" }, xt.label(t));
  }
  add("text", { x: (L + W) / 2, y: H - 3, "text-anchor": "middle" }, xLabel + (zoom ? " (zoomed: double-click to reset)" : ""));
  const plot = add("g", { "clip-path": `url(#${clip})` });
  const xy = (x, y) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`;
  for (const s of series) {
    if (s.band && s.band.length) {
      const band = s.band.filter(b => !logY || (b[1] > 0 && b[2] > 0));
      const upper = band.map(b => xy(b[0], b[2]));
      const lower = band.map(b => xy(b[0], b[1])).reverse();
      svgAdd(plot, "polygon", { points: upper.concat(lower).join(" "), fill: s.color, "fill-opacity": 0.18, stroke: "none", class: "band" });
    }
    const raw = finite(s);
    if (w > 0) {
      svgAdd(plot, "polyline", { points: raw.map(p => xy(p[0], p[1])).join(" "), fill: "none", stroke: s.color, "stroke-width": 1, "stroke-opacity": 0.25, class: "raw" });
    }
    const line = w > 0 ? ema(raw, w) : raw;
    svgAdd(plot, "polyline", { points: line.map(p => xy(p[0], p[1])).join(" "), fill: "none", stroke: s.color, "stroke-width": 1.5, class: "curve" });
    if (raw.length <= MARKED_POINTS) {
      for (const p of raw) svgAdd(plot, "circle", { cx: X(p[0]).toFixed(1), cy: Y(p[1]).toFixed(1), r: 3, fill: s.color, class: "marker" });
    }
  }
  // Hover: the nearest point in view, its run (or group), x and value.
  const hover = add("g", { class: "hover", visibility: "hidden" });
  const dot = svgAdd(hover, "circle", { r: 5, fill: "none", "stroke-width": 2 });
  const tipBox = svgAdd(hover, "rect", { class: "tip", rx: 3 });
  const tipText = svgAdd(hover, "text", { class: "tip" });
  const selection = add("rect", { class: "selection", y: T, height: H - B - T, visibility: "hidden" });
  const xName = xLabel.includes("seconds") ? "s" : "step";
  const candidates = series.flatMap(s => {
    const raw = finite(s);
    const smooth = w > 0 ? ema(raw, w) : null;
    return raw.map((p, k) => ({ s, x: p[0], y: p[1], smoothed: smooth && smooth[k][1] }));
  }).filter(c => inView([c.x]));
  const local = e => {
    const m = svg.getScreenCTM();
    if (!m) return null;
    const p = new DOMPoint(e.clientX, e.clientY).matrixTransform(m.inverse());
    return [p.x, p.y];
  };
  const unX = vx => x0 + (vx - L) / (W - L - 10) * (x1 - x0);
  let dragFrom = null;
  svg.onmousedown = e => {
    const p = local(e);
    if (p && p[0] >= L) { dragFrom = p[0]; e.preventDefault(); }
  };
  svg.onmousemove = e => {
    const p = local(e);
    if (!p) return;
    if (dragFrom !== null) {
      const [a, b] = [Math.min(dragFrom, p[0]), Math.max(dragFrom, p[0])];
      selection.setAttribute("x", Math.max(a, L));
      selection.setAttribute("width", Math.max(0, Math.min(b, W - 10) - Math.max(a, L)));
      selection.setAttribute("visibility", "visible");
    }
    let best = null, bestD = Infinity;
    for (const c of candidates) {
      const d = Math.hypot(X(c.x) - p[0], Y(c.smoothed ?? c.y) - p[1]);
      if (d < bestD) { best = c; bestD = d; }
    }
    if (!best) return;
    const text = `${best.s.label} · ${xName} ${exact(best.x)} · ${metric || "value"} ${exact(best.y)}` +
      (best.smoothed !== null ? ` (smoothed ${exact(best.smoothed)})` : "");
    readout.textContent = text;
    const cx = X(best.x), cy = Y(best.smoothed ?? best.y);
    dot.setAttribute("cx", cx);
    dot.setAttribute("cy", cy);
    dot.setAttribute("stroke", best.s.color);
    tipText.textContent = text;
    const width = Math.min(text.length * 6.8 + 8, W - L);
    const left = cx + 10 + width > W ? cx - 10 - width : cx + 10;
    const top = cy < T + 24 ? cy + 8 : cy - 24;
    tipBox.setAttribute("x", left); tipBox.setAttribute("y", top);
    tipBox.setAttribute("width", width); tipBox.setAttribute("height", 18);
    tipText.setAttribute("x", left + 4); tipText.setAttribute("y", top + 12);
    hover.setAttribute("visibility", "visible");
  };
  svg.onmouseleave = () => { hover.setAttribute("visibility", "hidden"); selection.setAttribute("visibility", "hidden"); dragFrom = null; };
  svg.onmouseup = e => {
    const p = local(e);
    const from = dragFrom;
    dragFrom = null;
    selection.setAttribute("visibility", "hidden");
    if (from === null || !p || Math.abs(p[0] - from) < 4) return;
    const [a, b] = [unX(Math.max(Math.min(from, p[0]), L)), unX(Math.min(Math.max(from, p[0]), W - 10))];
    if (b > a) { zoom = [a, b]; remember(); redraw(); }
  };
  svg.ondblclick = () => { if (zoom) { zoom = null; remember(); redraw(); } };
}

// Zoom, smoothing and the y axis change only the drawing.
function redraw() {
  if (runPage) drawRunPage(); else { drawCharts(); if (viewParams().has("group_by") && lastSheet) paintGroupRows(lastSheet); }
}

// The parameters view: the final metric against each parameter the runs swept, a panel per
// parameter and all of them in parallel coordinates; grouped, a point and a line per group.
async function loadScatter(params) {
  const q = new URLSearchParams();
  for (const k of ["where", "group_by"]) if (params.has(k)) q.set(k, params.get(k));
  const wanted = $("scatter-metric").value || url.get("smetric");
  if (wanted) q.set("metric", wanted);
  const { ok, body } = await getJson("/api/scatter", q);
  const select = $("scatter-metric");
  select.replaceChildren();
  for (const m of (ok ? body.metrics : body.known) || []) select.add(new Option(m, m, false, m === (ok ? body.metric : wanted)));
  lastScatter = ok ? body : null;
  if (!ok) {
    $("params-readout").textContent = body.error;
    $("panels").replaceChildren();
    $("parallel").replaceChildren();
    return;
  }
  $("params-readout").textContent = body.panels.length ? "" : "no parameter was swept over finished runs with this metric";
  $("params-what").textContent = body.grouped ? "one point per group and value, the mean of its runs" : "one point per finished run";
  drawScatter(body);
  drawParallel(body);
}

// A run's name as its curve is labelled (`4: tiny_stm d=96 gates=true`), else its id.
function runName(id) {
  for (const { body } of lastCurves) {
    const s = ((body && body.series) || []).find(s => String(s.id) === String(id));
    if (s) return s.label;
  }
  return `run ${id}`;
}

// What a point or line of the parameters view stands for: a run (its id) or a group (its
// label and size); its colour is its curve's.
function who(id, group, n) {
  if (group !== null && group !== undefined) {
    return { key: group, name: `${group} (${n} run${n === 1 ? "" : "s"})`, color: groupColor(group), id: null };
  }
  const color = runColor(id);
  return { key: String(id), name: color ? runName(id) : "other runs", color: color || "#555", id, faint: !color };
}

// The legend of a drawing (what its PNG shows under it): each run or group once, in its colour.
function legendOf(whos) {
  const seen = new Map();
  for (const w of whos) if (!seen.has(w.name)) seen.set(w.name, w.color);
  return [...seen];
}

function fillLegend(list, entries) {
  list.replaceChildren();
  for (const [label, color] of entries) {
    const li = document.createElement("li");
    const swatch = document.createElement("span");
    swatch.style.background = color;
    li.append(swatch, label);
    list.appendChild(li);
  }
}

function drawScatter(body) {
  const box = $("panels");
  box.replaceChildren();
  const all = [];
  for (const panel of body.panels) {
    const fig = document.createElement("figure");
    fig.className = "panel";
    fig.dataset.name = panel.name;
    const caption = document.createElement("figcaption");
    const svg = document.createElementNS(SVGNS, "svg");
    svg.setAttribute("class", "scatter");
    svg.setAttribute("viewBox", "0 0 320 220");
    caption.append(`${body.metric} by ${panel.name}` + (panel.axis === "log" ? " (log)" : ""), " ",
      button("PNG", "png", "this panel as a PNG image", () => exportPng(svg, `${body.metric}-by-${panel.name}`)));
    fig.append(caption, svg);
    box.appendChild(fig);
    all.push(...drawPanel(svg, panel, body.metric, body.grouped));
  }
  fillLegend($("params-legend"), legendOf(all));
}

// The ticks of an axis of parameter values: a few distinct values (a grid's) are the ticks
// themselves; categories are their names.
function valueTicks(values, cats, log, lo, hi) {
  const distinct = [...new Set(values)].sort((a, b) => a - b);
  return cats ? { values: cats.map((_, i) => i), label: i => cats[i] }
    : distinct.length <= 6 ? { values: distinct, label: exact }
    : log ? logTicks(lo, hi) : ticks(lo, hi, 5);
}

// An axis's range over `values`: categories from -0.5 to the last + 0.5; log axes widened by
// half a step each side; linear ones by 6 %.
function valueRange(values, cats, log) {
  if (cats) return [-0.5, cats.length - 0.5];
  let [lo, hi] = span(Math.min(...values), Math.max(...values), 0.5, 1);
  if (log) return [lo / 1.5, hi * 1.5];
  const pad = (hi - lo) * 0.06;
  return [lo - pad, hi + pad];
}

// Draws one panel; returns who its points stand for.
function drawPanel(svg, panel, metric, grouped) {
  const [W, H, L, B, T] = [320, 220, 50, 30, 8];
  const add = (tag, attrs, text) => svgAdd(svg, tag, attrs, text);
  const log = panel.axis === "log", cats = panel.axis === "categories" ? panel.categories : null;
  const xs = panel.points.map(p => p[0]), ys = panel.points.map(p => p[1]);
  if (!xs.length) return [];
  const tx = log ? (x => Math.log10(x)) : (x => x);
  const [x0, x1] = valueRange(xs, cats, log);
  let [y0, y1] = span(Math.min(...ys), Math.max(...ys), 0.1, 0.5);
  const padY = (y1 - y0) * 0.06;
  [y0, y1] = [y0 - padY, y1 + padY];
  const X = x => L + (tx(x) - tx(x0)) / (tx(x1) - tx(x0)) * (W - L - 10);
  const Y = y => H - B - (y - y0) / (y1 - y0) * (H - B - T);
  add("line", { class: "axis", x1: L, y1: H - B, x2: W - 10, y2: H - B });
  add("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B });
  const yt = ticks(y0, y1, 6);
  for (const t of yt.values) {
    add("line", { class: "grid", x1: L, y1: Y(t), x2: W - 10, y2: Y(t) });
    add("text", { class: "tick", x: L - 4, y: Y(t) + 4, "text-anchor": "end" }, yt.label(t));
  }
  const xt = valueTicks(xs, cats, log, x0, x1);
  for (const t of xt.values) {
    add("line", { class: "axis", x1: X(t), y1: H - B, x2: X(t), y2: H - B + 4 });
    add("text", { class: "tick", x: X(t), y: H - B + 16, "text-anchor": "middle" }, xt.label(t));
  }
  const whos = panel.points.map(p => grouped ? who(null, p[2], p[3]) : who(p[2]));
  // A group's points along a numeric axis are joined, so that its trend reads as a curve.
  if (grouped && !cats) {
    const lines = new Map();
    panel.points.forEach((p, i) => {
      if (!lines.has(whos[i].key)) lines.set(whos[i].key, { color: whos[i].color, points: [] });
      lines.get(whos[i].key).points.push(p);
    });
    for (const { color, points } of lines.values()) {
      if (points.length < 2) continue;
      points.sort((a, b) => a[0] - b[0]);
      add("polyline", { class: "group-line", fill: "none", stroke: color, "stroke-width": 1.5, "stroke-opacity": 0.6,
        points: points.map(p => `${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(" ") });
    }
  }
  panel.points.forEach((p, i) => {
    const [x, y] = p, w = whos[i];
    // Runs of one categorical value spread a little sideways (by id, so the same on every draw).
    const jitter = cats && !grouped ? ((w.id * 0.618034) % 1 - 0.5) * 0.3 : 0;
    const dot = add("circle", {
      cx: X(x + jitter).toFixed(1), cy: Y(y).toFixed(1), r: grouped ? 5 : w.faint ? 3 : 4, class: "dot",
      fill: w.color, "fill-opacity": w.faint ? 0.5 : 0.9,
    });
    const value = `${panel.name} ${cats ? cats[x] : exact(x)}`;
    const text = grouped ? `${w.name} · ${value} · mean ${metric} ${exact(y)}` : `run ${w.id} · ${value} · ${metric} ${exact(y)}`;
    if (grouped) dot.dataset.group = w.key; else dot.dataset.id = w.id;
    svgAdd(dot, "title", {}, text);
    dot.onmouseenter = () => { $("params-readout").textContent = text; };
    if (!grouped) dot.onclick = () => { location.hash = "#/run/" + w.id; };
  });
  svg.legend = legendOf(whos);
  return whos;
}

// Parallel coordinates: an axis per swept parameter (or group key) and the metric's last, a
// line per run or group; hovering a line brings it forward and reads it.
function drawParallel(body) {
  const box = $("parallel");
  box.replaceChildren();
  const { axes, lines } = body.parallel;
  if (!axes.length || !lines.length) return;
  const fig = document.createElement("figure");
  fig.className = "chart";
  const caption = document.createElement("figcaption");
  const svg = document.createElementNS(SVGNS, "svg");
  svg.setAttribute("class", "parallel");
  svg.setAttribute("viewBox", "0 0 640 300");
  caption.append(`${body.metric} and the ${body.grouped ? "group keys" : "swept parameters"}, parallel coordinates`, " ",
    button("PNG", "png", "the parallel coordinates as a PNG image", () => exportPng(svg, `${body.metric}-parallel`)));
  fig.append(caption, svg);
  box.appendChild(fig);
  const [W, H, L, R, B, T] = [640, 300, 60, 60, 24, 26];
  const add = (tag, attrs, text) => svgAdd(svg, tag, attrs, text);
  const n = axes.length + 1;
  const AX = i => L + i * (W - L - R) / (n - 1);
  const top = T, bottom = H - B;
  // Each axis maps its values onto [bottom, top].
  const scales = axes.map((a, i) => {
    const vals = lines.map(l => l.values[i]).filter(v => v !== null && v !== undefined);
    const cats = a.axis === "categories" ? a.categories : null, log = a.axis === "log";
    const [lo, hi] = vals.length ? valueRange(vals, cats, log) : [0, 1];
    const t = log ? (v => Math.log10(v)) : (v => v);
    return { name: a.name + (log ? " (log)" : ""), at: v => bottom - (t(v) - t(lo)) / (t(hi) - t(lo)) * (bottom - top),
      ticks: vals.length ? valueTicks(vals, cats, log, lo, hi) : { values: [], label: String }, cats };
  });
  const ys = lines.map(l => l.y);
  let [y0, y1] = span(Math.min(...ys), Math.max(...ys), 0.1, 0.5);
  const padY = (y1 - y0) * 0.06;
  [y0, y1] = [y0 - padY, y1 + padY];
  const yt = ticks(y0, y1, 6);
  scales.push({ name: body.metric, at: v => bottom - (v - y0) / (y1 - y0) * (bottom - top), ticks: yt, metric: true });
  scales.forEach((s, i) => {
    const x = AX(i);
    const g = add("g", { class: s.metric ? "pc-axis metric" : "pc-axis", "data-name": s.metric ? body.metric : axes[i].name });
    svgAdd(g, "line", { class: "axis", x1: x, y1: top, x2: x, y2: bottom });
    svgAdd(g, "text", { class: "title", x, y: 14, "text-anchor": "middle" }, s.name);
    for (const t of s.ticks.values) {
      const y = s.at(t);
      svgAdd(g, "line", { class: "axis", x1: x - 3, y1: y, x2: x + 3, y2: y });
      // The metric's labels on its right, the others on their left.
      svgAdd(g, "text", { class: "tick", x: s.metric ? x + 6 : x - 6, y: y + 4, "text-anchor": s.metric ? "start" : "end" }, s.ticks.label(t));
    }
  });
  const drawn = add("g", { class: "pc-lines" });
  const readout = $("params-readout");
  const whos = lines.map(l => who(l.id, l.group, l.n));
  lines.forEach((l, k) => {
    const w = whos[k];
    const points = l.values.map((v, i) => (v === null || v === undefined ? null : [AX(i), scales[i].at(v)]))
      .concat([[AX(n - 1), scales[n - 1].at(l.y)]]).filter(Boolean);
    const line = svgAdd(drawn, "polyline", {
      class: "pc-line", fill: "none", stroke: w.color, "stroke-width": w.faint ? 1 : 1.8, "stroke-opacity": w.faint ? 0.45 : 0.85,
      points: points.map(p => `${p[0].toFixed(1)},${p[1].toFixed(1)}`).join(" "),
    });
    if (l.group !== null && l.group !== undefined) line.dataset.group = w.key; else line.dataset.id = w.id;
    const values = axes.map((a, i) => {
      const v = l.values[i];
      return `${a.name} ${v === null || v === undefined ? "·" : a.axis === "categories" ? a.categories[v] : exact(v)}`;
    });
    const text = [l.group !== null && l.group !== undefined ? w.name : `run ${w.id}`, ...values,
      `${l.group !== null && l.group !== undefined ? "mean " : ""}${body.metric} ${exact(l.y)}`].join(" · ");
    svgAdd(line, "title", {}, text);
    line.onmouseenter = () => {
      svg.classList.add("hovering");
      line.classList.add("on");
      drawn.appendChild(line);
      readout.textContent = text;
    };
    line.onmouseleave = () => { svg.classList.remove("hovering"); line.classList.remove("on"); };
    if (w.id !== null) line.onclick = () => { location.hash = "#/run/" + w.id; };
  });
  svg.legend = legendOf(whos);
}

// A run's own page (`#/run/ID`): all its curves, one chart each, and its record and spec.
let runPage = null;

async function route() {
  const m = location.hash.match(/^#\/run\/(.*)$/);
  $("list-view").hidden = Boolean(m);
  $("run-view").hidden = !m;
  clearTimeout(refresh);
  if (!m) { runPage = null; show(); return; }
  if (!/^\d{1,19}$/.test(m[1])) {
    runPage = null;
    let name = m[1];
    try { name = decodeURIComponent(name); } catch (_) { /* shown as written */ }
    $("run-title").textContent = `\`${name}\` is not a run id`;
    $("run-charts").replaceChildren();
    $("run-config").textContent = "";
    return;
  }
  const res = await fetch("/api/run/" + m[1]);
  const body = await res.json();
  if (!res.ok) {
    runPage = null;
    $("run-title").textContent = body.error;
    $("run-charts").replaceChildren();
    $("run-config").textContent = "";
    return;
  }
  runPage = body;
  $("run-title").textContent = `run ${body.label} (${body.status})`;
  $("run-config").textContent = `${body.show}\n--- spec ---\n${body.spec}`;
  drawRunPage();
  if (body.status === "running") refresh = setTimeout(route, 2000);
  requestAnimationFrame(() => setTimeout(() => performance.mark("memctl:run-drawn")));
}

function drawRunPage() {
  const box = $("run-charts");
  box.replaceChildren();
  for (const [metric, points] of Object.entries(runPage.curves)) {
    const fig = document.createElement("figure");
    fig.className = "chart";
    fig.dataset.metric = metric;
    const svg = document.createElementNS(SVGNS, "svg");
    svg.setAttribute("class", "curves");
    svg.setAttribute("viewBox", "0 0 640 300");
    const readout = document.createElement("p");
    readout.className = "readout";
    const caption = document.createElement("figcaption");
    caption.append(metric, " ", button("PNG", "png", "this chart as a PNG image", () => exportPng(svg, `run${runPage.id}-${metric}`)));
    fig.append(caption, svg, readout);
    box.appendChild(fig);
    svg.legend = [[runPage.label, COLORS[0]]];
    draw(svg, [{ label: runPage.label, color: COLORS[0], points }], { xLabel: "training step", metric, readout });
  }
}

// A run's record (configuration, metrics, curve summaries, environment), as `memctl show`
// prints it, and the spec it ran.
async function detail(id) {
  const res = await fetch("/api/run/" + encodeURIComponent(id));
  const body = await res.json();
  $("detail").textContent = body.error || `${body.show}\n--- spec ${body.label} ---\n${body.spec}`;
}

async function diff() {
  const [a, b] = [...picked];
  const { body } = await getJson("/api/diff", new URLSearchParams({ a, b }));
  $("detail").textContent = body.error || body.text;
}

// The rows of the table shown, as CSV: values unrounded, durations in seconds, a group's
// statistic as three columns (`accuracy_mean`, `accuracy_std`, `accuracy_n`).
function csvText(sheet) {
  const quote = v => {
    const s = v === null || v === undefined ? "" : Array.isArray(v) ? v.join(";") : String(v);
    return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  const stat = c => sheet.rows.some(r => r[c] !== null && typeof r[c] === "object" && !Array.isArray(r[c]) && "mean" in r[c]);
  const head = [], cols = [];
  for (const c of sheet.columns) {
    if (stat(c)) for (const k of ["mean", "std", "n"]) { head.push(`${c}_${k}`); cols.push(r => r[c] && r[c][k]); }
    else { head.push(c); cols.push(r => r[c]); }
  }
  const lines = [head.map(quote).join(",")];
  for (const row of sheet.rows) lines.push(cols.map(get => quote(get(row))).join(","));
  return lines.join("\n") + "\n";
}

function download(blob, name) {
  const a = $("download");
  if (a.href) URL.revokeObjectURL(a.href);
  a.href = URL.createObjectURL(blob);
  a.download = name;
  a.click();
}

// A drawing as it is exported: the SVG with its style sheet's look written onto each element,
// and under it its legend (each run or group in its colour), as `{ svg, width, height }`.
function exportable(svg) {
  const clone = svg.cloneNode(true);
  const from = svg.querySelectorAll("*"), to = clone.querySelectorAll("*");
  const props = ["fill", "fill-opacity", "stroke", "stroke-width", "stroke-opacity", "opacity", "font-size", "font-family", "visibility"];
  from.forEach((e, i) => {
    const style = getComputedStyle(e);
    to[i].setAttribute("style", props.map(p => `${p}:${style.getPropertyValue(p)}`).join(";"));
  });
  for (const e of clone.querySelectorAll(".hover, .selection")) e.remove();
  const [, , width, h] = svg.getAttribute("viewBox").split(" ").map(Number);
  let height = h;
  const entries = svg.legend || [];
  if (entries.length) {
    const g = svgAdd(clone, "g", { class: "legend" });
    const row = 18;
    let x = 10, y = h + 4;
    for (const [label, color] of entries) {
      const wide = 24 + label.length * 6.6 + 16;
      if (x > 10 && x + wide > width - 10) { x = 10; y += row; }
      svgAdd(g, "rect", { x, y: y + 5, width: 16, height: 6, style: `fill:${color};stroke:none` });
      svgAdd(g, "text", { x: x + 22, y: y + 12, style: "fill:#222;font-size:12px;font-family:system-ui,sans-serif" }, label);
      x += wide;
    }
    height = y + row + 4;
  }
  clone.setAttribute("xmlns", SVGNS);
  clone.setAttribute("viewBox", `0 0 ${width} ${height}`);
  clone.setAttribute("width", width * 2);
  clone.setAttribute("height", height * 2);
  return { svg: clone, width, height };
}

// A drawing as PNG, drawn in the browser into a canvas at twice its size, on white.
async function pngBlob(svg) {
  const { svg: clone, width: w, height: h } = exportable(svg);
  const img = new Image();
  img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(new XMLSerializer().serializeToString(clone));
  await img.decode();
  const canvas = document.createElement("canvas");
  canvas.width = w * 2;
  canvas.height = h * 2;
  const ctx = canvas.getContext("2d");
  ctx.fillStyle = "white";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.drawImage(img, 0, 0, canvas.width, canvas.height);
  return new Promise(resolve => canvas.toBlob(resolve, "image/png"));
}

async function exportPng(svg, name) {
  download(await pngBlob(svg), `memctl-${name.replace(/[^\w.-]+/g, "_")}.png`);
}

function showTab() {
  for (const b of $("tabs").querySelectorAll("button")) b.classList.toggle("on", b.dataset.tab === tab);
  $("curves-view").hidden = tab !== "curves";
  $("params-view").hidden = tab !== "params";
}

function show() { remember(); loadRuns(); }

form.onsubmit = e => { e.preventDefault(); show(); };
$("x").onchange = show;
$("y").onchange = () => { remember(); redraw(); };
$("smooth").oninput = () => { $("smooth-value").value = smoothing().toFixed(2); remember(); redraw(); };
$("add-chart").onclick = () => {
  const known = (lastCurves[0] && lastCurves[0].body.metrics) || [];
  const shown = lastCurves.map(c => c.body.metric);
  charts = lastCurves.map((c, i) => charts[i] || c.body.metric || "");
  charts.push(known.find(m => !shown.includes(m)) || known[0] || "");
  show();
};
$("scatter-metric").onchange = () => { remember(); loadScatter(viewParams()); };
for (const b of $("tabs").querySelectorAll("button")) {
  b.onclick = () => { tab = b.dataset.tab; showTab(); remember(); if (tab === "params") loadScatter(viewParams()); };
}
$("csv").onclick = () => { if (lastSheet) download(new Blob([csvText(lastSheet)], { type: "text/csv" }), "memctl-runs.csv"); };
$("diff").onclick = () => { pane = "diff"; remember(); diff(); };
window.onhashchange = route;
for (const [k, v] of url) if (form.elements[k]) form.elements[k].value = v;
if (url.get("x")) $("x").value = url.get("x");
if (url.get("y")) $("y").value = url.get("y");
if (url.get("smooth")) { $("smooth").value = url.get("smooth"); $("smooth-value").value = smoothing().toFixed(2); }
showTab();
if (/^#\/run\//.test(location.hash)) route(); else loadRuns();
