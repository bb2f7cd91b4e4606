// perfmodel explore: controls, charts and text. Every number comes from the tables
// (tables.js reads DATA, which perfmodel.sweep() computed at build time); no model rule
// lives in this file.
"use strict";
const COLORS = { naive: "#c0392b", flash: "#2471a3" };
const ROOF_COLORS = { matmul: "#7d3c98", vector: "#117a65", exp: "#b9770e", hbm: "#566573", l2: "#a04000" };
const ROOFS = Object.keys(ROOF_COLORS);
const $ = (id) => document.getElementById(id);
let TABLES = null;

// --- controls --------------------------------------------------------------------------
function el(tag, attrs, children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children || []) e.append(c);
  return e;
}

function select(id, options, value, labels) {
  const s = el("select", { id: id });
  options.forEach((o, i) => s.append(el("option", { value: o }, [labels ? labels[i] : String(o)])));
  s.value = value;
  return s;
}

const headsLabel = ([h, hkv]) => (h === hkv ? `${h}` : `${h} (${hkv} K/V)`);
// the mask controls: a grid value, or "none" for no mask (null in the tables' axes)
const maskValue = (v) => (v === null ? "none" : String(v));
const maskRead = (s) => (s === "none" ? null : Number(s));
const windowLabel = (w) => (w === null ? "none" : `${grouped(w)} keys`);
const documentsLabel = (l) => (l === null ? "none" : `documents of ${grouped(l)} tokens`);
const prefixLabel = (p) => (p === null ? "none" : `prefix LM, ${grouped(p)}-token prefix`);
// a mask is set: none of the controls below is at "none"
const masked = (st) => st.window !== null || st.documents !== null || st.prefix_lm !== null;

function buildControls() {
  const c = $("controls");
  const ax = DATA.axes;
  const devices = Object.keys(DATA.devices);
  const opening = devices.includes(DATA.opening.hw) ? DATA.opening.hw : devices[0];
  const n = el("input", { id: "n", type: "number", min: DATA.n[0], max: DATA.n[DATA.n.length - 1], step: 1, value: DATA.opening.n });
  c.append(el("label", {}, ["device", select("hw", devices, opening)]));
  c.append(el("label", {}, ["n", n]));
  c.append(el("label", {}, ["d", select("d", ax.d, ax.d.includes(128) ? 128 : ax.d[0])]));
  c.append(el("label", {}, ["heads", select("heads", ax.heads.map((p) => p.join(":")), ax.heads[0].join(":"), ax.heads.map(headsLabel))]));
  c.append(el("label", {}, ["batch", select("batch", ax.batch, ax.batch[0])]));
  c.append(el("label", {}, ["dtype", select("dtype", [], "")]));
  c.append(el("label", {}, ["causal", el("input", { id: "causal", type: "checkbox" })]));
  c.append(el("label", {}, ["calibration", select("calibration", [], "")]));
  c.append(el("label", {}, ["kernel", select("kernel", ["auto", ...DATA.kernels], "auto")]));
  c.append(el("label", {}, ["naive compiled as", select("naive", DATA.naive, DATA.naive[0])]));
  c.append(el("label", {}, ["mode", select("mode", DATA.modes, DATA.modes[0])]));
  c.append(el("label", {}, ["sliding window", select("window", ax.window.map(maskValue), "none", ax.window.map(windowLabel))]));
  c.append(el("label", {}, ["mask", select("documents", ax.documents.map(maskValue), "none", ax.documents.map(documentsLabel))]));
  c.append(el("label", {}, ["block mask", select("prefix_lm", ax.prefix_lm.map(maskValue), "none", ax.prefix_lm.map(prefixLabel))]));
  $("hw").addEventListener("change", deviceChanged);
  for (const e of c.querySelectorAll("input, select")) {
    e.addEventListener("input", update);
    e.addEventListener("change", update);
  }
  deviceChanged();
}

function refill(id, options, keep) {
  const s = $(id);
  const old = s.value;
  s.innerHTML = "";
  for (const o of options) s.append(el("option", { value: o }, [o]));
  s.value = options.includes(old) ? old : keep;
}

function deviceChanged() {
  const dev = DATA.devices[$("hw").value];
  refill("dtype", dev.dtypes, dev.opening_dtype);
  refill("calibration", dev.calibrations, "default");
}

function readState() {
  const raw = $("n").value.trim();
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`n=${raw} must be a positive integer`);
  const [h, hkv] = $("heads").value.split(":").map(Number);
  const st = { n: n, d: Number($("d").value), h: h, h_kv: hkv, batch: Number($("batch").value) };
  for (const k of ["hw", "dtype", "calibration", "naive", "mode", "kernel"]) st[k] = $(k).value;
  st.causal = $("causal").checked;
  st.window = maskRead($("window").value);
  st.documents = maskRead($("documents").value);
  st.prefix_lm = maskRead($("prefix_lm").value);
  return st;
}

function opening(st) {
  // the setting the chapter's sentence and the n→∞ limit were computed for (explore.headlines)
  const plain = st.mode === "forward" && st.naive === DATA.naive[0] && st.calibration === "default" && st.kernel === "auto"
    && !masked(st);
  const shape = st.d === 128 && st.h === 1 && st.h_kv === 1 && st.batch === 1;
  return plain && shape ? DATA.headlines[[st.hw, st.dtype, st.causal ? 1 : 0].join("|")] || null : null;
}

// --- formatting ------------------------------------------------------------------------
function si(x, unit) {
  if (!Number.isFinite(x)) return String(x);
  const prefixes = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"], [1, ""], [1e-3, "m"], [1e-6, "µ"], [1e-9, "n"]];
  for (const [f, p] of prefixes) if (Math.abs(x) >= f) return `${(x / f).toPrecision(3)} ${p}${unit}`;
  return `${x.toPrecision(3)} ${unit}`;
}
const shownValue = (x) => (typeof x === "number" ? x.toPrecision(12) : String(x));
const grouped = (x) => x.toLocaleString("en-US");

// --- SVG charts --------------------------------------------------------------------------
const NS = "http://www.w3.org/2000/svg";
function svgEl(tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function chart(svg, o) {
  svg.innerHTML = "";
  const W = +svg.getAttribute("width"), H = +svg.getAttribute("height");
  const m = { l: 58, r: 150, t: 10, b: 34 };
  const xs = [], ys = [];
  for (const s of o.lines || []) { xs.push(...s.x); ys.push(...s.y); }
  for (const p of o.points || []) { xs.push(p.x); ys.push(p.y); }
  for (const h of o.hlines || []) ys.push(h.y);
  const ok = (v) => Number.isFinite(v) && v > 0;
  let [x0, x1] = [Math.min(...xs.filter(ok)), Math.max(...xs.filter(ok))];
  let [y0, y1] = [Math.min(...ys.filter(ok)), Math.max(...ys.filter(ok))];
  if (o.xrange) [x0, x1] = o.xrange;
  if (o.ylin) { y0 = 0; y1 *= 1.1; } else { y0 /= 1.6; y1 *= 1.6; }
  const lx = (v) => Math.log10(v);
  const X = (v) => m.l + ((lx(v) - lx(x0)) / (lx(x1) - lx(x0))) * (W - m.l - m.r);
  const Y = o.ylin
    ? (v) => H - m.b - ((v - y0) / (y1 - y0)) * (H - m.t - m.b)
    : (v) => H - m.b - ((lx(v) - lx(y0)) / (lx(y1) - lx(y0))) * (H - m.t - m.b);
  svg.append(svgEl("rect", { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, fill: "none", stroke: "#999" }));
  for (let e = Math.ceil(lx(x0)); e <= Math.floor(lx(x1)); e++) {
    svg.append(svgEl("line", { x1: X(10 ** e), x2: X(10 ** e), y1: m.t, y2: H - m.b, stroke: "#eee" }));
    svg.append(svgEl("text", { x: X(10 ** e), y: H - m.b + 13, "text-anchor": "middle" }, `1e${e}`));
  }
  const yticks = o.ylin ? [0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50].filter((v) => v <= y1 && (y1 < 8 || v % 2 === 0 || v > 6)) : [];
  if (!o.ylin) for (let e = Math.ceil(lx(y0)); e <= Math.floor(lx(y1)); e++) yticks.push(10 ** e);
  for (const v of yticks) {
    svg.append(svgEl("line", { x1: m.l, x2: W - m.r, y1: Y(v), y2: Y(v), stroke: "#eee" }));
    svg.append(svgEl("text", { x: m.l - 4, y: Y(v) + 4, "text-anchor": "end" }, o.ylin ? String(v) : `1e${Math.round(lx(v))}`));
  }
  svg.append(svgEl("text", { x: (W - m.r + m.l) / 2, y: H - 4, "text-anchor": "middle" }, o.xlabel));
  svg.append(svgEl("text", { x: 12, y: (H - m.b) / 2, transform: `rotate(-90 12 ${(H - m.b) / 2})`, "text-anchor": "middle" }, o.ylabel));
  const clip = (v, lo, hi) => Math.max(lo, Math.min(hi, v));
  let legendY = m.t + 10;
  const legend = (label, color, dash) => {
    svg.append(svgEl("line", { x1: W - m.r + 6, x2: W - m.r + 22, y1: legendY - 4, y2: legendY - 4, stroke: color, "stroke-width": 2, "stroke-dasharray": dash || "" }));
    svg.append(svgEl("text", { x: W - m.r + 26, y: legendY }, label));
    legendY += 14;
  };
  for (const h of o.hlines || []) {
    if (!ok(h.y) && !o.ylin) continue;
    svg.append(svgEl("line", { x1: m.l, x2: W - m.r, y1: Y(h.y), y2: Y(h.y), stroke: h.color, "stroke-dasharray": h.dash || "4 3" }));
    legend(h.label, h.color, h.dash || "4 3");
  }
  for (const s of o.lines || []) {
    const pts = s.x.map((x, i) => [x, s.y[i]]).filter(([x, y]) => ok(x) && (o.ylin ? Number.isFinite(y) : ok(y)));
    const d = pts.map(([x, y], i) => `${i ? "L" : "M"}${X(x).toFixed(1)},${clip(Y(y), m.t, H - m.b).toFixed(1)}`).join("");
    svg.append(svgEl("path", { d: d, fill: "none", stroke: s.color, "stroke-width": s.width || 2, "stroke-dasharray": s.dash || "" }));
    if (s.label) legend(s.label, s.color, s.dash);
  }
  for (const v of o.vlines || []) {
    svg.append(svgEl("line", { x1: X(v.x), x2: X(v.x), y1: m.t, y2: H - m.b, stroke: v.color || "#888", "stroke-dasharray": "2 2" }));
    if (v.label) svg.append(svgEl("text", { x: X(v.x) + 3, y: m.t + 12 }, v.label));
  }
  for (const p of o.points || []) {
    if (!ok(p.x) || !ok(p.y)) continue;
    const c = svgEl(p.square ? "rect" : "circle", p.square
      ? { x: X(p.x) - 4, y: Y(p.y) - 4, width: 8, height: 8 }
      : { cx: X(p.x), cy: Y(p.y), r: p.r || 5 });
    c.setAttribute("fill", p.hollow ? "white" : p.color);
    c.setAttribute("stroke", p.color);
    c.setAttribute("stroke-width", 2);
    svg.append(c);
    if (p.label) { legendY += 0; svg.append(svgEl("text", { x: X(p.x) + 7, y: Y(p.y) - 6, fill: p.color }, p.label)); }
  }
}

function drawRoofline(st, r) {
  const rates = DATA.devices[st.hw].rates[st.dtype];
  const has = (x) => rates[x] !== null;
  const I = [0.1, 1e5];
  const grid = Array.from({ length: 61 }, (_, i) => 10 ** (-1 + (6 * i) / 60));
  const lines = [];
  for (const mem of ["hbm", "l2"].filter(has))
    lines.push({ x: grid, y: grid.map((i) => i * rates[mem]), color: ROOF_COLORS[mem], label: `${mem} ${si(rates[mem], "B/s")}`, dash: mem === "l2" ? "6 3" : "" });
  const hlines = ["matmul", "vector", "exp"].filter(has)
    .map((c) => ({ y: rates[c], color: ROOF_COLORS[c], label: `${c} ${si(rates[c], c === "exp" ? "exp/s" : "FLOP/s")}`, dash: c === "matmul" ? "1 0" : "4 3" }));
  const points = [];
  for (const a of ["naive", "flash"]) {
    points.push({ x: r[a].intensity, y: r[a].flops / r[a].time_s, color: COLORS[a], label: a });
    points.push({ x: r[a].intensity, y: r[a].flops / r[a].t_lower_s, color: COLORS[a], hollow: true });
  }
  chart($("roofline"), { xlabel: "FLOP per HBM byte (filled: estimate, hollow: roofline floor)", ylabel: "FLOP/s", lines, hlines, points, xrange: I });
}

function measuredFor(st) {
  // the measured points are of unmasked attention: none is shown under a mask
  if (masked(st)) return [];
  return DATA.measured.filter((p) => p.device === st.hw && p.d === st.d && p.h === st.h && p.h_kv === st.h_kv
    && p.dtype === st.dtype && p.causal === st.causal && p.batch === st.batch && p.kv_len === p.n);
}

function drawCurves(st, head) {
  const c = Tables.along(TABLES, st, ["time_s", "t_lower_s", "footprint_bytes"]);
  const ns = c.n;
  const ratio = (col) => ns.map((_, i) => c.naive[col][i] / c.flash[col][i]);
  const hl = [{ y: 1, color: "#999", label: "1x", dash: "2 2" }];
  if (head) hl.push({ y: head.asymptote, color: "#000", label: `n→∞: ${head.asymptote.toFixed(2)}x`, dash: "6 3" });
  const meas = measuredFor(st);
  const byN = {};
  for (const p of meas) { (byN[p.n] = byN[p.n] || {})[p.algorithm] = Math.min(p.time_s, (byN[p.n] || {})[p.algorithm] || Infinity); }
  const mpts = Object.entries(byN).filter(([, v]) => v.naive && v.flash).map(([n, v]) => ({ x: +n, y: v.naive / v.flash, color: "#000", square: true }));
  chart($("speedup"), {
    xlabel: "n (kv_len = n; lines join the grid's points)", ylabel: "speedup", ylin: true, hlines: hl, points: mpts,
    lines: [
      { x: ns, y: ratio("time_s"), color: "#1e8449", label: "estimate" },
      { x: ns, y: ratio("t_lower_s"), color: "#1e8449", dash: "5 3", label: "roofline floor" },
    ],
    vlines: [{ x: st.shown_n, label: `n=${st.shown_n}` }],
  });
  const capacity = DATA.devices[st.hw].hbm_capacity_bytes;
  chart($("memory"), {
    xlabel: "n (kv_len = n)", ylabel: "bytes",
    hlines: [{ y: capacity, color: "#000", label: `HBM ${si(capacity, "B")}` }],
    lines: ["naive", "flash"].map((a) => ({ x: ns, y: c[a].footprint_bytes, color: COLORS[a], label: a })),
    vlines: [{ x: st.shown_n }],
  });
  const tpts = meas.map((p) => ({ x: p.n, y: p.time_s, color: COLORS[p.algorithm], square: true, hollow: p.basis !== "device" }));
  chart($("times"), {
    xlabel: "n (kv_len = n); squares: measured", ylabel: "seconds",
    lines: ["naive", "flash"].flatMap((a) => [
      { x: ns, y: c[a].time_s, color: COLORS[a], label: `${a} estimate` },
      { x: ns, y: c[a].t_lower_s, color: COLORS[a], dash: "4 3", label: `${a} floor` },
    ]),
    points: tpts, vlines: [{ x: st.shown_n }],
  });
}

function roofColumns(r) {
  // the roofs this setting has: the t_<roof>_s columns with a number on either side
  return ROOFS.filter((k) => ["naive", "flash"].some((a) => Number.isFinite(r[a][`t_${k}_s`])));
}

function drawBreakdown(r) {
  const svg = $("breakdown");
  svg.innerHTML = "";
  const rows = [];
  for (const a of ["naive", "flash"]) {
    for (const k of roofColumns(r)) rows.push([a, k, r[a][`t_${k}_s`]]);
    rows.push([a, "t_lower", r[a].t_lower_s]);
    rows.push([a, "estimate", r[a].time_s]);
  }
  const top = Math.max(...rows.map((x) => x[2]).filter(Number.isFinite));
  const W = +svg.getAttribute("width");
  rows.forEach(([a, k, t], i) => {
    const y = 6 + i * 20 + (a === "flash" ? 8 : 0);
    const width = Number.isFinite(t) ? ((W - 220) * t) / top : 0;
    svg.append(svgEl("text", { x: 4, y: y + 11, fill: COLORS[a] }, `${a} ${k}`));
    svg.append(svgEl("rect", { x: 120, y: y, width: Math.max(1, width), height: 14, fill: ROOF_COLORS[k] || COLORS[a] }));
    svg.append(svgEl("text", { x: 124 + width, y: y + 11 }, si(t, "s")));
  });
  svg.setAttribute("height", 20 * rows.length + 20);
}

function cell(id, v) {
  // the text at 12 digits; data-value: the exact float (JavaScript's shortest round trip)
  const shown = typeof v === "number" && !Number.isFinite(v) ? "—" : shownValue(v);
  return el("td", { id: id, "data-value": String(v) }, [shown]);
}

function fillNumbers(st, r) {
  const t = $("numbers");
  t.innerHTML = "";
  t.append(el("tr", {}, [el("th", {}, ["column"]), el("th", { class: "naive" }, ["naive"]), el("th", { class: "flash" }, ["flash"])]));
  const names = [...new Set([...DATA.columns.naive, ...DATA.columns.flash])];
  for (const k of names) {
    const values = ["naive", "flash"].map((a) => r[a][k]);
    if (values.every((v) => v === undefined || (typeof v === "number" && Number.isNaN(v)))) continue;
    t.append(el("tr", {}, [el("td", {}, [k]), ...["naive", "flash"].map((a, i) =>
      values[i] === undefined ? el("td", {}, ["—"]) : cell(`val-${a}-${k}`, values[i]))]));
  }
  t.append(el("tr", {}, [el("td", {}, ["speedup"]), el("td", { colspan: 2 }, [cell("val-speedup", r.speedup)])]));
  const head = opening(st);
  if (head) t.append(el("tr", {}, [el("td", {}, ["speedup as n→∞"]), el("td", { colspan: 2 }, [cell("val-asymptote", head.asymptote)])]));
}

function where(st, r) {
  if (r.shown_n === st.n) return `n=${grouped(st.n)}: the engine's numbers (perfmodel.sweep at build time).`;
  return `n=${grouped(st.n)} is not on the page's grid: shown at the nearest grid point, n=${grouped(r.shown_n)} (perfmodel predict --n ${st.n} gives this n).`;
}

function update() {
  $("error").textContent = "";
  try {
    const st = readState();
    const r = Tables.at(TABLES, st, st.n);
    st.shown_n = r.shown_n;
    fillNumbers(st, r);
    $("where").textContent = where(st, r);
    const head = opening(st);
    $("conclusion").textContent = head ? head.headline
      : "The chapter's sentence (perfmodel.report.conclusions) is computed at the opening setting: d=128, one head, batch 1, forward, kernel auto, default calibration, the device's opening dtype, no window or mask.";
    drawRoofline(st, r);
    drawCurves(st, head);
    drawBreakdown(r);
    document.body.dataset.state = "ready";
  } catch (e) {
    $("error").textContent = e.message;
    document.body.dataset.state = "error";
  }
}

Tables.open(DATA).then((t) => {
  TABLES = t;
  buildControls();
  update();
}, (e) => {
  $("error").textContent = `the page's tables could not be read: ${e.message}`;
  document.body.dataset.state = "error";
});
