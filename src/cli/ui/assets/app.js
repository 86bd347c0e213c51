// memctl ui: the page's state lives in its URL (so a view can be shared), the data comes
// from /api/* (read-only), and the view refreshes every 2 s while any run is training.
"use strict";

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
const FIELDS = ["where", "group_by", "sort", "columns", "ablation"];
const MOST_DRAWN = 10;
const form = document.getElementById("view");
const $ = id => document.getElementById(id);
const url = new URLSearchParams(location.search);
const picked = new Set((url.get("picked") || "").split(",").filter(Boolean));
let shownRun = url.get("run");
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
  if (shownRun) p.set("run", shownRun);
  history.replaceState(null, "", "?" + p.toString());
}

function fmt(x) {
  if (x === null || x === undefined || Number.isNaN(x)) return "·";
  if (Number.isInteger(x)) return String(x);
  return Math.abs(x) >= 1000 || Math.abs(x) < 0.01 ? x.toExponential(2) : x.toPrecision(3);
}

function cell(v) {
  if (v === null || v === undefined) return "·";
  if (typeof v === "object" && "mean" in v) return `${fmt(v.mean)} ± ${fmt(v.std)} (${v.n})`;
  if (Array.isArray(v)) return v.join(", ");
  return typeof v === "number" ? fmt(v) : String(v);
}

// Fills a table from a sheet ({columns, rows}); `onRow(row, tr)` decorates each row.
function fillTable(table, sheet, onHead, onRow) {
  const head = table.tHead, body = table.tBodies[0];
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
      td.textContent = cell(row[c]);
      if (c === "status") td.className = "status-" + row[c];
    }
    if (onRow) onRow(row, r);
    rows.appendChild(r);
  }
  body.appendChild(rows);
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
    tr.onclick = () => { picked.has(id) ? picked.delete(id) : picked.add(id); shownRun = id; show(); };
  });
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
  if (shownRun) await detail(shownRun);
  $("diff").disabled = picked.size !== 2;
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
  const pane = $("ablation-pane");
  pane.hidden = !params.has("ablation");
  if (pane.hidden) return;
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

function draw(series, xLabel) {
  const svg = $("curves"), legend = $("legend");
  svg.replaceChildren();
  legend.replaceChildren();
  const pts = series.flatMap(s => s.points.concat((s.band || []).flatMap(b => [[b[0], b[1]], [b[0], b[2]]])));
  const xs = pts.map(p => p[0]), ys = pts.map(p => p[1]).filter(Number.isFinite);
  if (!ys.length) return;
  const [W, H, L, B] = [640, 360, 56, 34];
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const X = x => L + (x - x0) / ((x1 - x0) || 1) * (W - L - 10);
  const Y = y => H - B - (y - y0) / ((y1 - y0) || 1) * (H - B - 10);
  const add = (tag, attrs, text) => {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  add("line", { class: "axis", x1: L, y1: H - B, x2: W - 10, y2: H - B });
  add("line", { class: "axis", x1: L, y1: 10, x2: L, y2: H - B });
  add("text", { x: L - 4, y: Y(y1) + 4, "text-anchor": "end" }, fmt(y1));
  add("text", { x: L - 4, y: Y(y0), "text-anchor": "end" }, fmt(y0));
  add("text", { x: X(x0), y: H - B + 14 }, fmt(x0));
  add("text", { x: X(x1), y: H - B + 14, "text-anchor": "end" }, fmt(x1));
  add("text", { x: (L + W) / 2, y: H - 4, "text-anchor": "middle" }, xLabel);
  const xy = (x, y) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`;
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    if (s.band && s.band.length) {
      const upper = s.band.map(b => xy(b[0], b[2]));
      const lower = s.band.map(b => xy(b[0], b[1])).reverse();
      add("polygon", { points: upper.concat(lower).join(" "), fill: color, "fill-opacity": 0.18, stroke: "none", class: "band" });
    }
    const d = s.points.filter(p => Number.isFinite(p[1])).map(p => xy(p[0], p[1])).join(" ");
    add("polyline", { points: d, fill: "none", stroke: color, "stroke-width": 1.5, class: "curve" });
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
$("diff").onclick = diff;
for (const [k, v] of url) if (form.elements[k]) form.elements[k].value = v;
if (url.get("x")) $("x").value = url.get("x");
loadRuns();
