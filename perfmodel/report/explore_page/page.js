// perfmodel explore: controls, evaluation through the generated MODELS, and plain SVG.
// MODELS (printed by sympy from perfmodel.evaluate's expressions) computes every column;
// this file reads controls, resolves the kernel family's launch (a copy of
// perfmodel.kernel_config.resolve, held to predict() by tests/test_explore_browser.py),
// runs the models as perfmodel.evaluate.evaluate_flash does, draws, and formats text.
"use strict";
const ROOFS = ["matmul", "vector", "exp", "hbm", "l2"];
const COLORS = { naive: "#c0392b", flash: "#2471a3" };
const ROOF_COLORS = { matmul: "#7d3c98", vector: "#117a65", exp: "#b9770e", hbm: "#566573", l2: "#a04000" };
const $ = (id) => document.getElementById(id);

// --- controls --------------------------------------------------------------------------
const NUMBERS = ["n", "kv_len", "d", "h", "h_kv", "batch", "block_q", "block_k", "warps", "splits", "page_tokens"];
const DEFAULTS = { n: 4096, kv_len: "", d: 128, h: 1, h_kv: "", batch: 1, block_q: "", block_k: "", warps: "", splits: "", page_tokens: "" };
const BLANK = { kv_len: "= n", h_kv: "= h", block_q: "family's", block_k: "family's", warps: "family's", splits: "family's", page_tokens: "none" };

function el(tag, attrs, children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children || []) e.append(c);
  return e;
}

function select(id, options, value) {
  const s = el("select", { id: id });
  for (const o of options) s.append(el("option", { value: o }, [o]));
  s.value = value;
  return s;
}

function buildControls() {
  const c = $("controls");
  const devices = Object.keys(DATA.devices);
  c.append(el("label", {}, ["device", select("hw", devices, devices.includes("H200 SXM") ? "H200 SXM" : devices[0])]));
  for (const k of NUMBERS) {
    const attrs = { id: k, type: "number", min: 1, step: 1 };
    if (DEFAULTS[k] !== "") attrs.value = DEFAULTS[k];
    else attrs.placeholder = BLANK[k];
    c.append(el("label", {}, [k, el("input", attrs)]));
  }
  c.append(el("label", {}, ["dtype", select("dtype", [], "")]));
  c.append(el("label", {}, ["causal", el("input", { id: "causal", type: "checkbox" })]));
  c.append(el("label", {}, ["calibration", select("calibration", [], "")]));
  c.append(el("label", {}, ["kernel", select("kernel", ["auto", ...Object.keys(DATA.families)], "auto")]));
  c.append(el("label", {}, ["naive compiled as", select("naive", DATA.naive, DATA.naive[0])]));
  c.append(el("label", {}, ["mode", select("mode", DATA.modes, DATA.modes[0])]));
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
  refill("dtype", dev.dtypes, dev.dtypes.includes("fp16") ? "fp16" : dev.dtypes[0]);
  refill("calibration", Object.keys(dev.profiles), "default");
}

function intValue(k) {
  const raw = $(k).value.trim();
  if (raw === "" && k in BLANK) return null;
  const v = Number(raw);
  if (!Number.isInteger(v) || v <= 0) throw new Error(`${k}=${raw} must be a positive integer`);
  return v;
}

function readState() {
  const st = {};
  for (const k of NUMBERS) st[k] = intValue(k);
  if (st.kv_len === null) st.kv_len = st.n;
  if (st.h_kv === null) st.h_kv = st.h;
  for (const k of ["hw", "dtype", "calibration", "naive", "mode", "kernel"]) st[k] = $(k).value;
  st.causal = $("causal").checked;
  if (st.h % st.h_kv) throw new Error(`h=${st.h} is not divisible by h_kv=${st.h_kv}`);
  if (st.causal && st.kv_len !== st.n)
    throw new Error(`causal attention needs kv_len == n; got n=${st.n}, kv_len=${st.kv_len}`);
  const auto = DATA.auto_kernel[st.calibration];
  if (st.kernel === "auto" && auto.error) throw new Error(auto.error);
  st.family = st.kernel === "auto" ? auto.kernel : st.kernel;
  st.launch = launchTiles(st, DATA.devices[st.hw], DATA.families[st.family]);
  const profile = DATA.devices[st.hw].profiles[st.calibration][st.family];
  if (profile.error) throw new Error(profile.error);
  return st;
}

// --- the kernel family's launch: perfmodel.kernel_config.resolve, one point -------------
function tileFor(fam, d, causal, arch) {
  for (const t of fam.tiles)
    if (d <= t.d_max && (t.arch === null || t.arch === arch) && (t.causal === null || t.causal === causal)) return t;
  const largest = fam.tiles.length ? ` (largest: ${Math.max(...fam.tiles.map((t) => t.d_max))})` : "";
  throw new Error(`kernel family '${fam.name}' has no tile for head dim d=${d}${largest}`);
}

function checkTile(name, v, multiple) {
  if (v <= 0 || v % multiple) throw new Error(`${name}=${v} must be a positive multiple of ${multiple}`);
}

function launchTiles(st, dev, fam) {
  // what does not depend on n: tiles, warps, on-chip footprint and capacity
  const named = st.block_q !== null || st.block_k !== null;
  const tile = tileFor(fam, st.d, st.causal, dev.arch);
  const bq = st.block_q === null ? tile.block_q : st.block_q;
  const bk = st.block_k === null ? tile.block_k : st.block_k;
  const warps = st.warps === null ? tile.warps : st.warps;
  checkTile("block_q", bq, 16);
  checkTile("block_k", bk, 8);
  const s = dev.bytes[st.dtype];
  const stages = tile.kv_stages === null ? fam.kv_stages : tile.kv_stages;
  const smem = (bq + stages * 2 * bk) * st.d * s;
  const threads = 32 * warps, producers = 32 * fam.producer_warps;
  const regs = (bq * bk + bq * st.d + 2 * bq) / threads;
  const limit = dev.smem_per_block_bytes || dev.sram_per_sm_bytes;
  if (smem > limit) {
    const what = `tile block_q=${bq}, block_k=${bk} at d=${st.d}` + (named ? "" : ` (kernel family '${fam.name}')`);
    throw new Error(`${what} needs ${smem} B of shared memory; ${dev.name} allows ${limit} B ${dev.smem_per_block_bytes ? "per block" : "per SM"}`);
  }
  let blocks = Math.floor(dev.sram_per_sm_bytes / Math.max(smem, 1));
  let spilled = 0;
  if (dev.max_registers_per_thread !== null) {
    const cap = dev.max_registers_per_thread;
    spilled = Math.max(0, regs - cap);
    const perBlock = Math.min(regs, cap) * threads + 32 * producers;
    blocks = Math.min(blocks, Math.floor(dev.registers_per_sm / perBlock),
      Math.floor(dev.max_threads_per_sm / (threads + producers)), dev.max_blocks_per_sm);
  }
  return {
    block_q: bq, block_k: bk, warps: warps, blocks_per_sm: Math.max(blocks, 1),
    onchip: {
      blocks_per_sm: Math.max(blocks, 1),
      spill_bytes_per_tile: 2 * 4 * spilled * threads,
      bytes_in_flight: 2 * bk * st.d * s * (fam.producer_warps ? stages : 1),
    },
  };
}

function gqaPack(rule, n, group, bq) {
  const up = (a) => Math.ceil(a / bq) * bq;
  const packed = { none: false, always: true, decode: n === 1, when_short: n / up(n) < (0.9 * (n * group)) / up(n * group) }[rule];
  return packed && group > 1 ? group : 1;
}

function waveEfficiencySplits(programs, slots, kvBlocks, maxSplits, skipSmall) {
  if (programs >= 0.8 * slots) return 1;
  if (skipSmall && kvBlocks <= 4) return 1;
  const limit = Math.min(maxSplits, slots, kvBlocks);
  const eff = [];
  for (let s = 1; s <= limit; s++) {
    const waves = (programs * s) / slots;
    eff.push(waves / Math.ceil(waves));
  }
  const best = Math.max(...eff);
  return eff.findIndex((e) => e >= 0.85 * best) + 1;
}

function kvSplits(fam, dev, n, m, d, h, pack, b, bq) {
  const splitBq = fam.split_block_q || bq;
  const programs = b * Math.floor(h / pack) * Math.ceil((n * pack) / splitBq);
  let bk = splitBq;
  if (fam.split_block_k.length) {
    const hit = fam.split_block_k.find(([dMax]) => d <= dMax);
    bk = hit ? hit[1] : fam.tiles.length ? fam.tiles[fam.tiles.length - 1].block_k : 128;
  }
  const kvBlocks = Math.ceil(m / bk);
  if (fam.split_kv === "none" || fam.max_splits === 1) return 1;
  const slots = dev.sm_count * fam.split_sm_factor;
  if (fam.split_kv === "one_wave") return Math.max(1, Math.min(kvBlocks, Math.floor(slots / Math.max(programs, 1)), fam.max_splits));
  return waveEfficiencySplits(programs, slots, kvBlocks, fam.max_splits, fam.split_kv === "fa3");
}

// --- evaluation: the generated model, as perfmodel.predict runs it --------------------
function values(st, dev, n, kv, extra) {
  // API names -> symbol names (perfmodel.vocabulary.SYMBOL_OF), device symbols and the
  // launch's packing, splits and tile_gcd as perfmodel.evaluate.shape_values adds them.
  const api = { n: n, kv_len: kv, d: st.d, h: st.h, h_kv: st.h_kv, batch: st.batch, block_q: st.launch.block_q, block_k: st.launch.block_k };
  const x = { pack: 1, splits: 1, page: 1 };
  for (const [k, v] of Object.entries(api)) x[DATA.symbol_of[k] || k] = v;
  Object.assign(x, extra || {});
  x.tile_gcd = gcd(Math.round(st.launch.block_q / x.pack), st.launch.block_k);
  x[DATA.symbol_of.dtype] = dev.bytes[st.dtype];
  x.l2_capacity = dev.l2_capacity;
  x.resident_ctas = dev.sm_count * (extra && "blocks_per_sm" in extra ? extra.blocks_per_sm : 1);
  return x;
}

function gcd(a, b) {
  while (b) [a, b] = [b, a % b];
  return a;
}

function model(key, st, dev) {
  return MODELS[key][st.causal ? 1 : 0][dev.l2 ? 1 : 0];
}

function prepare(st) {
  // what does not change with n: the device, the profiles, the launch's tiles
  const dev = DATA.devices[st.hw];
  const profile = dev.profiles[st.calibration][st.family];
  return { st: st, dev: dev, fam: DATA.families[st.family], inputs: { naive: profile.naive[st.dtype], flash: profile.flash[st.dtype] } };
}

function runFlash(prep, n, kv, pack, splits, onchip) {
  const { st, dev } = prep;
  const paged = st.page_tokens !== null;
  const key = DATA.launch_keys[splits > 1 ? 1 : 0][paged ? 1 : 0]; // explore.flash_key
  const x = values(st, dev, n, kv, { pack: pack, splits: splits, page: st.page_tokens || 1, blocks_per_sm: st.launch.blocks_per_sm });
  delete x.blocks_per_sm;
  return model(key, st, dev)(Object.assign(x, prep.inputs.flash, onchip));
}

function forward(prep, n, kv, full) {
  // perfmodel.evaluate.evaluate_flash: the family's launch; t_lower over the packings
  const { st, dev, fam } = prep;
  const group = st.h / st.h_kv;
  const pack = gqaPack(fam.gqa_packing, n, group, st.launch.block_q);
  const splits = st.splits !== null ? st.splits : kvSplits(fam, dev, n, kv, st.d, st.h, pack, st.batch, st.launch.block_q);
  const out = runFlash(prep, n, kv, pack, splits, st.launch.onchip);
  if (full) {
    const seen = [[pack, splits]];
    let lowest = out.t_lower_s;
    for (const [p, s] of [[1, 1], [group, 1], [1, splits], [group, splits]]) {
      if (seen.some(([a, b]) => a === p && b === s)) continue;
      seen.push([p, s]);
      lowest = Math.min(lowest, runFlash(prep, n, kv, p, s, NO_ONCHIP).t_lower_s);
    }
    out.t_lower_s = lowest;
    out.attainable_flops_per_s = out.matmul_flops / out.t_lower_s;
  }
  // perfmodel.evaluate.call_latency: the fitted dispatch per kernel, else the framework's
  const dispatch = prep.inputs.flash.dispatch_s;
  out.call_latency_s = out.time_s + (dispatch ? dispatch * (splits > 1 ? 2 : 1) : fam.framework_s);
  return out;
}
const NO_ONCHIP = { blocks_per_sm: 1, spill_bytes_per_tile: 0, bytes_in_flight: 0 };

const ADDITIVE = ["flops", "matmul_flops", "vector_flops", "exp_count", "hbm_bytes", "hbm_bytes_no_cache", "l2_bytes", "t_compute_s", "t_memory_s", "t_lower_s", "time_s"];
const LARGER = ["extra_memory_bytes", "sram_bytes", "register_bytes", "footprint_bytes"];

function forwardThenBackward(fwd, bwd) {
  // perfmodel.evaluate.forward_then_backward
  const out = Object.assign({}, fwd);
  for (const k of Object.keys(fwd)) {
    if (ADDITIVE.includes(k) || (k.startsWith("t_") && k in bwd)) out[k] = fwd[k] + bwd[k];
    else if (LARGER.includes(k) && k in bwd) out[k] = Math.max(fwd[k], bwd[k]);
  }
  out.fits_memory = fwd.fits_memory && bwd.fits_memory ? 1 : 0;
  out.intensity = out.flops / out.hbm_bytes;
  out.attainable_flops_per_s = out.matmul_flops / out.t_lower_s;
  out.bound_compute = out.t_compute_s >= out.t_memory_s ? 1 : 0;
  out.call_latency_s = fwd.call_latency_s + bwd.time_s;
  return out;
}

function flashAt(prep, n, kv, full) {
  const { st, dev } = prep;
  if (st.mode === "forward") return forward(prep, n, kv, full);
  const x = Object.assign(values(st, dev, n, kv), prep.inputs.flash);
  const bwd = model(DATA.keys.flash[st.naive].backward, st, dev)(x);
  return st.mode === "backward" ? bwd : forwardThenBackward(forward(prep, n, kv, full), bwd);
}

function at(prep, n, kv, full) {
  const { st, dev } = prep;
  const naiveFn = model(DATA.keys.naive[st.naive][st.mode], st, dev);
  const out = { naive: naiveFn(Object.assign(values(st, dev, n, kv), prep.inputs.naive)), flash: flashAt(prep, n, kv, full) };
  out.speedup = out.naive.time_s / out.flash.time_s;
  return out;
}

function evaluateAt(st, n, kv) {
  return at(prepare(st), n, kv, true);
}

function roofsOf(dev, st) {
  const rates = dev.profiles[st.calibration][st.family].flash[st.dtype];
  return ROOFS.filter((r) => Number.isFinite(rates[`rate_${r}`]));
}

function bindingRoof(col, roofs) {
  // first largest wins, as perfmodel.roofline.binding_roof
  let best = roofs[0];
  for (const r of roofs) if (col[`t_${r}_s`] > col[`t_${best}_s`]) best = r;
  return best;
}

// --- formatting ------------------------------------------------------------------------
function si(x, unit) {
  if (!Number.isFinite(x)) return String(x);
  const prefixes = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"], [1, ""], [1e-3, "m"], [1e-6, "µ"], [1e-9, "n"]];
  for (const [f, p] of prefixes) if (Math.abs(x) >= f) return `${(x / f).toPrecision(3)} ${p}${unit}`;
  return `${x.toPrecision(3)} ${unit}`;
}
const full = (x) => (typeof x === "number" ? x.toPrecision(12) : String(x));
const grouped = (x) => x.toLocaleString("en-US");
const pct0 = (x) => `${x >= 0 ? "+" : "-"}${Math.abs(x * 100).toFixed(0)}%`;

// --- the chapter's sentence (perfmodel.report.conclusions.Conclusions.headline) ----------
const THRESHOLD = 1.5;
const N_MAX = 131072;

function crossover(st) {
  // smallest X with speedup >= threshold at every integer n in [X, N_MAX]
  let last = 0;
  const prep = prepare(st);
  for (let n = 1; n <= N_MAX; n++) {
    const r = at(prep, n, n, false);
    if (!(r.speedup >= THRESHOLD)) last = n;
  }
  return last === N_MAX ? null : last + 1;
}

function headline(st) {
  const ref = evaluateAt(st, DATA.n_reference, DATA.n_reference);
  const gain = ref.speedup - 1;
  const saving = 1 - ref.flash.footprint_bytes / ref.naive.footprint_bytes;
  const x = crossover(st);
  const p = `${((THRESHOLD - 1) * 100).toFixed(0)}%`;
  const tail = `at n=${grouped(DATA.n_reference)} throughput is ${pct0(gain)} and attention memory −${(saving * 100).toFixed(1)}%`;
  if (x === null) return `The model never has flash ${p} faster at every n up to ${grouped(N_MAX)}; ${tail}.`;
  if (x === 1) return `Gains are significant at every n (flash at least ${p} faster from n = 1 to ${grouped(N_MAX)}); ${tail}.`;
  return `Gains become significant beyond n ≈ ${grouped(x)} (flash at least ${p} faster at every n from there to ${grouped(N_MAX)}); ${tail}.`;
}

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
  const dev = DATA.devices[st.hw];
  const rates = dev.profiles[st.calibration][st.family].flash[st.dtype];
  const roofs = roofsOf(dev, st);
  const I = [0.1, 1e5];
  const grid = Array.from({ length: 61 }, (_, i) => 10 ** (-1 + (6 * i) / 60));
  const lines = [];
  for (const mem of ["hbm", "l2"].filter((x) => roofs.includes(x)))
    lines.push({ x: grid, y: grid.map((i) => i * rates[`rate_${mem}`]), color: ROOF_COLORS[mem], label: `${mem} ${si(rates[`rate_${mem}`], "B/s")}`, dash: mem === "l2" ? "6 3" : "" });
  const hlines = ["matmul", "vector", "exp"].filter((x) => roofs.includes(x))
    .map((c) => ({ y: rates[`rate_${c}`], color: ROOF_COLORS[c], label: `${c} ${si(rates[`rate_${c}`], c === "exp" ? "exp/s" : "FLOP/s")}`, dash: c === "matmul" ? "1 0" : "4 3" }));
  const points = [];
  for (const a of ["naive", "flash"]) {
    points.push({ x: r[a].intensity, y: r[a].flops / r[a].time_s, color: COLORS[a], label: a });
    points.push({ x: r[a].intensity, y: r[a].flops / r[a].t_lower_s, color: COLORS[a], hollow: true });
  }
  chart($("roofline"), { xlabel: "FLOP per HBM byte (filled: estimate, hollow: roofline floor)", ylabel: "FLOP/s", lines, hlines, points, xrange: I });
}

function nGrid() {
  const out = [];
  for (let e = 6; e <= 20; e += 0.25) out.push(Math.round(2 ** e));
  return out;
}

function measuredFor(st) {
  const dev = DATA.devices[st.hw];
  return DATA.measured.filter((p) => p.device === dev.name && p.d === st.d && p.h === st.h && p.h_kv === st.h_kv
    && p.dtype === st.dtype && p.causal === st.causal && p.batch === st.batch && p.kv_len === p.n);
}

function asymptote(st) {
  // perfmodel.analysis.asymptotics.asymptotic_speedup for this shape and family
  const dev = DATA.devices[st.hw];
  const code = dev.asymptote[st.causal ? 1 : 0];
  const plain = st.warps === null && st.splits === null && st.page_tokens === null;
  if (!plain || st.mode !== "forward" || st.naive !== "minimal" || st.calibration !== "default" || st.kv_len !== st.n) return null;
  const profile = dev.profiles.default[st.family];
  const x = values(st, dev, 1, 1);
  for (const a of ["naive", "flash"]) {
    const inputs = profile[a][st.dtype];
    for (const r of ROOFS) x[`R_${a}_${r}`] = inputs[`rate_${r}`] * inputs[`eff_${r}`];
    const blocks = a === "flash" ? st.launch.blocks_per_sm : 1;
    x[`overlap_${a}`] = 1 - (1 - inputs.compute_overlap) / blocks;
  }
  return new Function(...Object.keys(x), `return ${code};`)(...Object.values(x));
}

function drawCurves(st) {
  const ns = nGrid();
  const rs = ns.map((n) => evaluateAt(st, n, n));
  const dev = DATA.devices[st.hw];
  const lim = asymptote(st);
  const hl = [{ y: 1, color: "#999", label: "1x", dash: "2 2" }];
  if (lim !== null) hl.push({ y: lim, color: "#000", label: `n→∞: ${lim.toFixed(2)}x`, dash: "6 3" });
  const meas = measuredFor(st);
  const byN = {};
  for (const p of meas) { (byN[p.n] = byN[p.n] || {})[p.algorithm] = Math.min(p.time_s, (byN[p.n] || {})[p.algorithm] || Infinity); }
  const mpts = Object.entries(byN).filter(([, v]) => v.naive && v.flash).map(([n, v]) => ({ x: +n, y: v.naive / v.flash, color: "#000", square: true }));
  chart($("speedup"), {
    xlabel: "n (kv_len = n)", ylabel: "speedup", ylin: true, hlines: hl, points: mpts,
    lines: [
      { x: ns, y: rs.map((r) => r.speedup), color: "#1e8449", label: "estimate" },
      { x: ns, y: rs.map((r) => r.naive.t_lower_s / r.flash.t_lower_s), color: "#1e8449", dash: "5 3", label: "roofline floor" },
    ],
    vlines: [{ x: st.n, label: `n=${st.n}` }],
  });
  chart($("memory"), {
    xlabel: "n (kv_len = n)", ylabel: "bytes",
    hlines: [{ y: dev.hbm_capacity_bytes, color: "#000", label: `HBM ${si(dev.hbm_capacity_bytes, "B")}` }],
    lines: ["naive", "flash"].map((a) => ({ x: ns, y: rs.map((r) => r[a].footprint_bytes), color: COLORS[a], label: a })),
    vlines: [{ x: st.n }],
  });
  const tpts = meas.map((p) => ({ x: p.n, y: p.time_s, color: COLORS[p.algorithm], square: true, hollow: p.basis !== "device" }));
  chart($("times"), {
    xlabel: "n (kv_len = n); squares: measured", ylabel: "seconds",
    lines: ["naive", "flash"].flatMap((a) => [
      { x: ns, y: rs.map((r) => r[a].time_s), color: COLORS[a], label: `${a} estimate` },
      { x: ns, y: rs.map((r) => r[a].t_lower_s), color: COLORS[a], dash: "4 3", label: `${a} floor` },
    ]),
    points: tpts, vlines: [{ x: st.n }],
  });
}

function drawBreakdown(st, r) {
  const svg = $("breakdown");
  svg.innerHTML = "";
  const roofs = roofsOf(DATA.devices[st.hw], st);
  const rows = [];
  for (const a of ["naive", "flash"]) {
    for (const k of roofs) rows.push([a, k, r[a][`t_${k}_s`]]);
    rows.push([a, "t_lower", r[a].t_lower_s]);
    rows.push([a, "estimate", r[a].time_s]);
  }
  const top = Math.max(...rows.map((x) => x[2]));
  const W = +svg.getAttribute("width");
  rows.forEach(([a, k, t], i) => {
    const y = 6 + i * 20 + (a === "flash" ? 8 : 0);
    svg.append(svgEl("text", { x: 4, y: y + 11, fill: COLORS[a] }, `${a} ${k}`));
    svg.append(svgEl("rect", { x: 120, y: y, width: Math.max(1, ((W - 220) * t) / top), height: 14, fill: ROOF_COLORS[k] || COLORS[a] }));
    svg.append(svgEl("text", { x: 124 + ((W - 220) * t) / top, y: y + 11 }, si(t, "s")));
  });
  svg.setAttribute("height", 20 * rows.length + 20);
}

function cell(a, k, v) {
  return el("td", { id: `val-${a}-${k}` }, [full(v)]);
}

function fillNumbers(st, r) {
  const t = $("numbers");
  t.innerHTML = "";
  t.append(el("tr", {}, [el("th", {}, ["column"]), el("th", { class: "naive" }, ["naive"]), el("th", { class: "flash" }, ["flash"])]));
  const roofs = roofsOf(DATA.devices[st.hw], st);
  for (const k of Object.keys(r.naive).filter((k) => k !== "call_latency_s")) {
    if (k.startsWith("t_") && ROOFS.includes(k.slice(2, -2)) && !roofs.includes(k.slice(2, -2))) continue;
    if (k === "l2_bytes" && !DATA.devices[st.hw].l2) continue;
    t.append(el("tr", {}, [el("td", {}, [k]), ...["naive", "flash"].map((a) => cell(a, k, r[a][k]))]));
  }
  if (Number.isFinite(r.flash.call_latency_s))
    t.append(el("tr", {}, [el("td", {}, ["call_latency_s"]), el("td", {}, ["—"]), cell("flash", "call_latency_s", r.flash.call_latency_s)]));
  for (const a of ["naive", "flash"]) {
    r[a].binding_roof = bindingRoof(r[a], roofs);
    r[a].bound = r[a].bound_compute ? "compute" : "memory";
  }
  for (const k of ["bound", "binding_roof"])
    t.append(el("tr", {}, [el("td", {}, [k]), ...["naive", "flash"].map((a) => el("td", { id: `val-${a}-${k}` }, [r[a][k]]))]));
  t.append(el("tr", {}, [el("td", {}, ["speedup"]), el("td", { id: "val-speedup", colspan: 2 }, [full(r.speedup)])]));
  const lim = asymptote(st);
  if (lim !== null)
    t.append(el("tr", {}, [el("td", {}, ["speedup as n→∞"]), el("td", { id: "val-asymptote", colspan: 2 }, [full(lim)])]));
}

let pending = null;
function update() {
  // The table at once; curves and the sentence (a scan over every n) once typing pauses.
  $("error").textContent = "";
  document.body.dataset.state = "busy";
  clearTimeout(pending);
  let st;
  try {
    st = readState();
  } catch (e) {
    $("error").textContent = e.message;
    document.body.dataset.state = "error";
    return;
  }
  const r = evaluateAt(st, st.n, st.kv_len);
  fillNumbers(st, r);
  $("conclusion").textContent = "…";
  pending = setTimeout(() => {
    drawRoofline(st, r);
    drawCurves(st);
    drawBreakdown(st, r);
    $("conclusion").textContent = headline(st);
    document.body.dataset.state = $("error").textContent ? "error" : "ready";
  }, 300);
}

buildControls();
update();
