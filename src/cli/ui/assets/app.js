// memctl ui: the page's state lives in its URL (so a view can be shared), the data comes
// from /api/* (read-only), and the view refreshes every 2 s while a run it shows is training.
"use strict";

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
const FIELDS = ["where", "group_by", "sort", "columns", "ablation"];
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
let refresh = null;

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
  if ($("metric").value) p.set("metric", $("metric").value);
  if ($("x").value !== "step") p.set("x", $("x").value);
  if ($("y").value !== "auto") p.set("y", $("y").value);
  if (shownRun) p.set("run", shownRun);
  if (pane === "diff") p.set("pane", "diff");
  history.replaceState(null, "", "?" + p.toString());
}

// Three significant digits, as the CLI's tables print numbers.
function fmt(x) {
  if (x === null || x === undefined || Number.isNaN(x)) return "·";
  if (Number.isInteger(x)) return String(x);
  return Math.abs(x) >= 1e6 || Math.abs(x) < 1e-3 ? x.toExponential(2) : x.toPrecision(3);
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

async function loadRuns() {
  const params = viewParams();
  const grouped = params.has("group_by");
  // A group's curves need only the view: asked for beside the table, not after it.
  const groupCurves = grouped ? fetchCurves(new URLSearchParams(params)) : null;
  const { ok, body } = await getJson("/api/runs", params);
  if (!ok) { showError(body.error); return; }
  showError(null);
  fillTable($("runs"), body, sortBy, (row, tr) => {
    if (grouped || row.id === undefined) return;
    const id = String(row.id);
    tr.dataset.id = id;
    if (picked.has(id)) tr.classList.add("picked");
    tr.onclick = () => { picked.has(id) ? picked.delete(id) : picked.add(id); shownRun = id; pane = "run"; show(); };
  });
  offerColumns(body.available, body.columns, grouped);
  const n = body.matched;
  $("summary").textContent = `${n} ${grouped ? "group" : "run"}${n === 1 ? "" : "s"}` +
    (n > body.rows.length ? ` (the first ${body.rows.length} shown: filter or sort for others)` : "") +
    (body.running ? `; ${body.running} running, refreshing` : "");
  if (grouped) {
    drawCurves(await groupCurves);
  } else {
    const ids = picked.size ? [...picked] : body.rows.map(r => r.id).slice(0, MOST_DRAWN);
    drawCurves(await fetchCurves(new URLSearchParams({ ids: ids.join(",") })));
  }
  await loadAblation(params);
  $("diff").disabled = picked.size !== 2;
  if (pane === "diff" && picked.size === 2) await diff();
  else if (shownRun) await detail(shownRun);
  clearTimeout(refresh);
  if (body.running) refresh = setTimeout(loadRuns, 2000);
  // After the next frame is painted: what `cargo bench --bench dashboard` times.
  requestAnimationFrame(() => setTimeout(() => performance.mark("memctl:drawn")));
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

function fetchCurves(q) {
  const wanted = $("metric").value || url.get("metric") || "";
  if (wanted) q.set("metric", wanted);
  q.set("x", $("x").value);
  return getJson("/api/curves", q);
}

// The metrics the runs have, `chosen` selected (none: the first).
function offerMetrics(metrics, chosen) {
  const select = $("metric");
  select.replaceChildren();
  for (const m of metrics || []) select.add(new Option(m, m, false, m === chosen));
}

function drawCurves({ ok, body }) {
  // A metric the runs lack comes back with those they have, to pick from.
  if (!ok) { showError(body.error); if (body.known) offerMetrics(body.known, null); return; }
  offerMetrics(body.metrics, body.metric);
  $("curves-note").textContent = body.capped ? `curves of the first ${body.drawn} of ${body.matched} runs` : "";
  draw(body.series || [], body.x || "training step");
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

function draw(series, xLabel) {
  const svg = $("curves"), legend = $("legend");
  svg.replaceChildren();
  legend.replaceChildren();
  const pts = series.flatMap(s => s.points.concat((s.band || []).flatMap(b => [[b[0], b[1]], [b[0], b[2]]])));
  const xs = pts.map(p => p[0]), ys = pts.map(p => p[1]).filter(Number.isFinite);
  if (!ys.length) return;
  const [W, H, L, B] = [640, 360, 56, 34];
  const [x0, x1] = span(Math.min(...xs), Math.max(...xs), 0.5, 1);
  let [y0, y1] = span(Math.min(...ys), Math.max(...ys), 0.1, 0.5);
  // `0–1`: accuracies on a fixed axis, so 0.085 to 0.109 does not fill the height.
  if ($("y").value === "unit") [y0, y1] = [Math.min(0, y0), Math.max(1, y1)];
  const X = x => L + (x - x0) / (x1 - x0) * (W - L - 10);
  const Y = y => H - B - (y - y0) / (y1 - y0) * (H - B - 10);
  const add = (tag, attrs, text) => {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  add("line", { class: "axis", x1: L, y1: H - B, x2: W - 10, y2: H - B });
  add("line", { class: "axis", x1: L, y1: 10, x2: L, y2: H - B });
  const yt = ticks(y0, y1, 6), xt = ticks(x0, x1, 6);
  for (const t of yt.values) {
    add("line", { class: "grid", x1: L, y1: Y(t), x2: W - 10, y2: Y(t) });
    add("text", { class: "tick", x: L - 4, y: Y(t) + 4, "text-anchor": "end" }, yt.label(t));
  }
  for (const t of xt.values) {
    add("line", { class: "axis", x1: X(t), y1: H - B, x2: X(t), y2: H - B + 4 });
    add("text", { class: "tick", x: X(t), y: H - B + 16, "text-anchor": "middle" }, xt.label(t));
  }
  add("text", { x: (L + W) / 2, y: H - 4, "text-anchor": "middle" }, xLabel);
  const xy = (x, y) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`;
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    if (s.band && s.band.length) {
      const upper = s.band.map(b => xy(b[0], b[2]));
      const lower = s.band.map(b => xy(b[0], b[1])).reverse();
      add("polygon", { points: upper.concat(lower).join(" "), fill: color, "fill-opacity": 0.18, stroke: "none", class: "band" });
    }
    const finite = s.points.filter(p => Number.isFinite(p[1]));
    add("polyline", { points: finite.map(p => xy(p[0], p[1])).join(" "), fill: "none", stroke: color, "stroke-width": 1.5, class: "curve" });
    if (finite.length <= MARKED_POINTS) {
      for (const p of finite) add("circle", { cx: X(p[0]).toFixed(1), cy: Y(p[1]).toFixed(1), r: 3, fill: color, class: "marker" });
    }
    const li = document.createElement("li");
    const swatch = document.createElement("span");
    swatch.style.background = color;
    li.append(swatch, s.label);
    legend.appendChild(li);
  });
}

// A run's page: its record as `memctl show` prints it (configuration, metrics, curves,
// environment) and the spec it ran.
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

function show() { remember(); loadRuns(); }

form.onsubmit = e => { e.preventDefault(); show(); };
$("metric").onchange = show;
$("x").onchange = show;
$("y").onchange = show;
$("diff").onclick = () => { pane = "diff"; remember(); diff(); };
for (const [k, v] of url) if (form.elements[k]) form.elements[k].value = v;
if (url.get("x")) $("x").value = url.get("x");
if (url.get("y")) $("y").value = url.get("y");
loadRuns();
