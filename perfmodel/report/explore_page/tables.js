// perfmodel explore's table reader. No model lives here: DATA (perfmodel/report/explore.py)
// holds what perfmodel.sweep() computed on a grid. This file inflates the tables, finds
// the row of a setting and reads its columns at the grid point nearest n: the engine's
// numbers as sweep() gave them, never interpolated (explore.py's docstring says why). No
// DOM: the tests run it in Node.js.
"use strict";
const Tables = (() => {
  async function inflate(b64) {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  async function open(data) {
    // the pool: float64 byte planes (every value's byte 0, then byte 1, ...), little-endian
    const planes = await inflate(data.pool);
    const count = planes.length / 8;
    const bytes = new Uint8Array(planes.length);
    for (let b = 0; b < 8; b++) {
      const plane = planes.subarray(b * count, (b + 1) * count);
      for (let i = 0; i < count; i++) bytes[8 * i + b] = plane[i];
    }
    const view = new DataView(bytes.buffer);
    const values = new Float64Array(count);
    for (let i = 0; i < count; i++) values[i] = view.getFloat64(8 * i, true);
    const raw = await inflate(data.rows);
    const rowView = new DataView(raw.buffer);
    const rows = new Int32Array(raw.length / 4);
    for (let i = 0; i < rows.length; i++) rows[i] = rowView.getInt32(4 * i, true);
    return { data: data, values: values, rows: rows, width: data.n.length };
  }

  function position(list, value, what) {
    const i = list.findIndex((v) => JSON.stringify(v) === JSON.stringify(value));
    if (i < 0) throw new Error(`${what}=${JSON.stringify(value)} is not on the page's grid (${JSON.stringify(list)})`);
    return i;
  }

  function rowStart(t, side, st) {
    // the first vector index of st's row: block (device, calibration, naive compile or
    // kernel family, mode), then the mask (window, documents, prefix LM:
    // explore.mask_settings),
    // then dtype, d, heads, batch, causal, as explore.shape_rows
    const d = t.data;
    const variant = side === "naive" ? st.naive : family(d, st);
    const block = d.blocks[side][[st.hw, st.calibration, variant, st.mode].join("|")];
    if (block === undefined) throw new Error(`no table for ${st.hw}, ${st.calibration}, ${variant}, ${st.mode}`);
    const ax = d.axes;
    const sizes = [ax.window, ax.documents, ax.prefix_lm, d.devices[st.hw].dtypes, ax.d, ax.heads, ax.batch, ax.causal];
    const at = [
      position(ax.window, st.window, "window"), position(ax.documents, st.documents, "documents"),
      position(ax.prefix_lm, st.prefix_lm, "prefix_lm"),
      position(sizes[3], st.dtype, "dtype"), position(ax.d, st.d, "d"),
      position(ax.heads, [st.h, st.h_kv], "(h, h_kv)"), position(ax.batch, st.batch, "batch"),
      position(ax.causal, st.causal, "causal"),
    ];
    let row = 0;
    for (let k = 0; k < sizes.length; k++) row = row * sizes[k].length + at[k];
    const width = d.columns[side].length;
    const start = d.offsets[side] + (block + row) * width;
    const first = t.rows[start];
    if (first < 0) throw new Error(d.errors[-1 - first]);
    return start;
  }

  function nearest(ns, n) {
    // the grid point nearest n in log n (ties: the smaller); n itself where it is one
    if (!(n >= ns[0] && n <= ns[ns.length - 1]))
      throw new Error(`n=${n} is outside the page's grid (${ns[0]} to ${ns[ns.length - 1]})`);
    let lo = 0, hi = ns.length - 1;
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      if (ns[mid] <= n) lo = mid; else hi = mid;
    }
    if (ns[lo] === n) return lo;
    if (ns[hi] === n) return hi;
    return Math.log(n / ns[lo]) <= Math.log(ns[hi] / n) ? lo : hi;
  }

  function side(t, name, st, i) {
    // every column of one side at grid point i, as sweep() gave it
    const d = t.data;
    const start = rowStart(t, name, st);
    const out = {};
    d.columns[name].forEach((col, k) => {
      const v = t.values[t.rows[start + k] * t.width + i];
      const kind = d.kinds[col];
      out[col] = kind === "label" ? d.labels[col][v] : kind === "flag" ? v === 1 : v;
    });
    return out;
  }

  function family(data, st) {
    // the flash kernel family of a setting: the one named, or "auto": the one predict()
    // picks on the device for the calibration (explore.auto_kernel)
    if (st.kernel !== "auto") return st.kernel;
    const auto = data.auto_kernel[st.hw][st.calibration];
    if (auto.error) throw new Error(auto.error);
    return auto.kernel;
  }

  function at(t, st, n) {
    // both sides at the grid point nearest n (``shown_n``), and the speedup: naive time
    // over flash time, as predict() reports it. The flash row first: where both sides'
    // rows are refused, its message is predict()'s for the kernel family named (a naive
    // row holds the message of the first family that refuses it)
    const i = nearest(t.data.n, n);
    const flash = side(t, "flash", st, i), naive = side(t, "naive", st, i);
    return { naive: naive, flash: flash, shown_n: t.data.n[i], speedup: naive.time_s / flash.time_s };
  }

  function along(t, st, columns) {
    // columns at every grid n, per side: {n, naive: {col: [...]}, flash: {...}}
    const d = t.data;
    const out = { n: d.n };
    for (const name of ["flash", "naive"]) {  // as at(): the flash row's refusal first
      const start = rowStart(t, name, st);
      out[name] = {};
      for (const col of columns) {
        const k = d.columns[name].indexOf(col);
        const base = t.rows[start + k] * t.width;
        out[name][col] = Array.from(t.values.subarray(base, base + t.width));
      }
    }
    return out;
  }

  return { open: open, at: at, along: along, family: family };
})();
if (typeof module !== "undefined") module.exports = Tables;
