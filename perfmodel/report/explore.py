"""``perfmodel explore``: one self-contained HTML page that shows the model's numbers.

**Design: tables computed by** :func:`perfmodel.sweep` **at build time; the page looks
them up and interpolates.** Every number the page shows was computed by the Python
engine: nothing of the model (tiles, on-chip fit, blocks per SM, GQA packing, split-KV,
the floor over launches, the roofline glue, forward-then-backward) is written in
JavaScript, copied or generated. Why tables rather than JavaScript printed from the
Python definitions:

* the cost formulas are sympy expressions and print well, but the launch rules and the
  glue around them are numpy code (choices, minima over launches, loops over split
  counts); printing them would mean a translator from Python to JavaScript that follows
  every change of the engine, and the page's numbers would still be a second
  implementation that a test holds equal;
* tables depend only on ``sweep``'s public arguments and column names, so a rewrite of
  the engine changes the page's numbers without touching the page, and a column the
  engine adds appears on the page by itself;
* at a grid point the page shows the engine's float64 bit for bit.

What it costs: the controls are the grid's values (:class:`~perfmodel.report.explore_grid.Grid`:
devices, their dtypes and calibration profiles, kernel family, naive compile, mode,
causality, head dim, heads, batch), and n, the one continuous control, is a log grid
(``steps_per_octave`` points per octave from 1 to ``2**n_max_log2``, every power of two
included). An n between grid points is shown at the nearest grid point (in log n), and
the page says so: the numbers are never interpolated. Interpolating was tried and
measured (``benchmarks/explore_interpolation.py``): the model is piecewise in n (the
split-KV count, whether K/V fit in L2, tile counts, wave quantisation), so a value
interpolated between two grid points can be far from anything the model gives at that
n (docs/explore.md has the figures). The size grows with the product of the grid (the
command prints it); ``docs/explore.md`` gives the figures.

The data: every column vector (one value per grid n) is stored once (most repeat:
work does not depend on the device, fp16 and bf16 time alike on most devices), as
float64 byte planes deflated and base64-encoded; each table row names its column
vectors by index. The page inflates them with the browser's ``DecompressionStream``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import inspect
import itertools
import json
import math
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfmodel.catalog.calibration import known_calibrations
from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.catalog.kernels import known_kernels, load_kernel
from perfmodel.costs import MODES, masks
from perfmodel.costs.naive import IMPLEMENTATIONS as NAIVE_IMPLEMENTATIONS
from perfmodel.errors import PerfmodelError
from perfmodel.evaluate import roof_rates
from perfmodel.prediction import calibration_profiles, flash_family, predict, sweep
from perfmodel.report.conclusions import N_REFERENCE
from perfmodel.report.explore_grid import Grid
from perfmodel.vocabulary import ALGORITHMS, BYTES_PER_ELEMENT, ROOFS

#: The dtype select's choice "FP8 as the family runs it": ``dtype="fp8", fp8_as_run=True``.
AS_RUN = "fp8 as run"
#: predict() parameters the page offers as a control. A parameter added to predict()
#: and missing here and in NOT_SHOWN fails tests/test_explore.py: the page must learn it.
CONTROLS = {
    "n": "number (a grid point: the engine's numbers; between: interpolated)",
    "hw": "device select (the grid's devices)",
    "d": "select (the grid's head dims)",
    "h": "select of the grid's (h, h_kv) pairs",
    "h_kv": "with h",
    "batch": "select (the grid's batches)",
    "dtype": "select (the device's dtypes)",
    "causal": "checkbox",
    "calibration": "select of the profiles valid on the device",
    "naive": "select",
    "mode": "select",
    "kernel": "select of the flash kernel families (auto: the profile's, else fa2)",
    "window": "select: the grid's sliding windows (none: no window)",
    "segments": "the mask picker: packed documents of the grid's lengths (segments=L)",
    "block_mask": "the block-mask picker: attention-gym's prefix LM of the grid's prefixes "
    "(block_mask=costs.masks.PrefixLM(P), a mask_mod counted at every n)",
    "fp8_as_run": f"the dtype select's {AS_RUN!r} (dtype='fp8', fp8_as_run=True) where the "
    "device has fp8",
}
_LAUNCH = "the kernel family's own launch: each value would be another table per row"
#: predict() parameters the page leaves at their default, and why.
NOT_SHOWN = {
    "kv_len": "= n: the page draws self-attention along n",
    "window_align": "kv_len = n on the page, where both alignments place the queries alike",
    "block_q": _LAUNCH,
    "block_k": _LAUNCH,
    "warps": _LAUNCH,
    "splits": _LAUNCH,
    "page_tokens": "contiguous KV cache (paging: a decode question, perfmodel advise)",
    "ceilings": "predict()'s default, 'measured' (a device's measured ceilings where it has "
    "them, else the datasheet deratings); each choice would be another table per row",
    "cp": "multi-device split: Prediction.parallel (perfmodel.parallel), not drawn",
    "cp_scheme": "multi-device split: Prediction.parallel (perfmodel.parallel), not drawn",
    "tp": "multi-device split: Prediction.parallel (perfmodel.parallel), not drawn",
    "block_size": "the tile of a block-mask array (the page's block mask is a mask_mod)",
}

#: The roofs, by name (the ``t_<roof>_s`` columns).
ROOF_NAMES = tuple(str(r) for r in ROOFS)
#: Sides of the page; each has its own tables (the naive side does not depend on the
#: flash kernel family, the flash side not on how naive is compiled).
SIDES = ALGORITHMS


# --- the tables ---------------------------------------------------------------------------
@dataclass
class _Pool:
    """Column vectors (one float64 per grid n), each stored once."""

    width: int
    index: dict[bytes, int] = field(default_factory=dict)
    vectors: list[bytes] = field(default_factory=list)

    def add(self, vector: np.ndarray) -> int:
        raw = np.ascontiguousarray(vector, dtype="<f8").tobytes()
        key = hashlib.blake2b(raw, digest_size=16).digest()
        if key not in self.index:
            self.index[key] = len(self.vectors)
            self.vectors.append(raw)
        return self.index[key]

    def encoded(self) -> str:
        """Byte planes (every vector's first bytes, then second, ...) deflated, base64."""
        flat = np.frombuffer(b"".join(self.vectors), dtype=np.uint8).reshape(-1, 8)
        return _pack(np.ascontiguousarray(flat.T).tobytes())


def _pack(raw: bytes) -> str:
    return base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


@dataclass
class _Tables:
    """Rows of column-vector indices per side, and the labels of text columns."""

    pool: _Pool
    columns: dict[str, list[str]] = field(default_factory=lambda: {a: [] for a in SIDES})
    rows: dict[str, list[dict[str, int] | int]] = field(
        default_factory=lambda: {a: [] for a in SIDES}
    )
    labels: dict[str, list[str]] = field(default_factory=dict)
    #: "number", "flag" (a bool: 0 or 1) or "label" (text: an index into ``labels``)
    kinds: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def error(self, message: str) -> int:
        if message not in self.errors:
            self.errors.append(message)
        return self.errors.index(message)

    def vector(self, name: str, values: np.ndarray) -> int:
        """A column's values at the grid's n, as a pool index (text as label codes)."""
        kind = {"O": "label", "U": "label", "S": "label", "b": "flag"}.get(values.dtype.kind)
        self.kinds.setdefault(name, kind or "number")
        if kind == "label":
            known = self.labels.setdefault(name, [])
            for v in values:
                if str(v) not in known:
                    known.append(str(v))
            values = np.array([known.index(str(v)) for v in values], dtype=float)
        return self.pool.add(np.asarray(values, dtype=float))

    def add_rows(self, side: str, result: dict[str, np.ndarray], count: int) -> None:
        """``count`` rows of a sweep whose points are rows × grid n (n fastest)."""
        width = self.pool.width
        names = [k for k in result if k.startswith(f"{side}.")]
        if side == "flash":  # the launch's tile (a sweep input column, the family's tile)
            names += ["block_q", "block_k"]
        for name in names:
            short = name.split(".", 1)[-1]
            if short not in self.columns[side]:
                self.columns[side].append(short)
        for i in range(count):
            part = slice(i * width, (i + 1) * width)
            row = {}
            for name in names:
                values = np.asarray(result[name][part])
                row[name.split(".", 1)[-1]] = self.vector(name.split(".", 1)[-1], values)
            self.rows[side].append(row)

    def encoded_rows(self) -> tuple[dict[str, int], str]:
        """Every side's rows as one int32 array (row width: the side's columns; an error
        row holds ``-1 - message index``); the first row of each side."""
        missing = self.pool.add(np.full(self.pool.width, np.nan))
        out: list[int] = []
        offsets: dict[str, int] = {}
        for side in SIDES:
            offsets[side] = len(out)
            for row in self.rows[side]:
                if isinstance(row, int):
                    out += [-1 - row] * len(self.columns[side])
                else:
                    out += [row.get(c, missing) for c in self.columns[side]]
        return offsets, _pack(np.asarray(out, dtype="<i4").tobytes())


def dtype_choices(names: Sequence[str]) -> list[str]:
    """The dtype select's values on a device with these dtypes: each, and after fp8
    :data:`AS_RUN` (FP8 as the family's FP8 kernel runs it)."""
    return [c for t in names for c in ([t, AS_RUN] if t == "fp8" else [t])]


def row_arguments(row: dict[str, Any]) -> dict[str, Any]:
    """A table row's sweep() arguments (the dtype choice :data:`AS_RUN` is fp8 with
    ``fp8_as_run``)."""
    if row.get("dtype") != AS_RUN:
        return dict(row)
    return {**row, "dtype": "fp8", "fp8_as_run": True}


def shape_rows(grid: Grid, dtypes: Sequence[str]) -> list[dict[str, Any]]:
    """The rows of one mask's table, in the page's order: dtype, d, heads, batch, causal."""
    return [
        dict(dtype=t, d=d, h=h, h_kv=h_kv, batch=b, causal=c)
        for t, d, (h, h_kv), b, c in itertools.product(
            dtypes, grid.d, grid.heads, grid.batch, (False, True)
        )
    ]


def mask_settings(grid: Grid) -> list[dict[str, Any]]:
    """The masks of the page, in its order (window, then documents, then the prefix LM;
    each table holds the shape rows of every mask, one after the other): ``predict``'s
    mask arguments."""
    return [
        {
            k: v
            for k, v in (
                ("window", w),
                ("segments", docs),
                ("block_mask", None if p is None else masks.PrefixLM(p)),
            )
            if v is not None
        }
        for w, docs, p in itertools.product(grid.windows, grid.documents, grid.prefixes)
    ]


def _sweep_rows(
    spec: HardwareSpec, rows: list[dict[str, Any]], ns: list[int], **fixed: Any
) -> dict[str, np.ndarray]:
    """sweep() over ``rows`` × ``ns`` (n fastest): one call per value of ``fp8_as_run``
    (:func:`row_arguments`; one value a call), the rows back in their order."""
    calls: dict[bool, list[int]] = {}
    for i, r in enumerate(rows):
        calls.setdefault(bool(row_arguments(r).get("fp8_as_run")), []).append(i)
    parts, order = [], []
    for as_run, index in calls.items():
        args = [row_arguments(rows[i]) for i in index]
        points = {k: np.repeat([a[k] for a in args], len(ns)) for k in rows[0]}
        n = np.tile(ns, len(index))
        columns: dict[str, Any] = {**points, **fixed}
        parts.append(sweep(spec, n=n, grid=False, **columns, fp8_as_run=as_run))
        order += index
    if len(parts) == 1:
        return parts[0]
    back = np.argsort(order)  # row i of the stacked parts is rows[order[i]]
    return {
        k: np.concatenate([np.asarray(p[k]).reshape(-1, len(ns)) for p in parts])[back].ravel()
        for k in parts[0]
    }


def _table(
    tables: _Tables,
    side: str,
    spec: HardwareSpec,
    rows: list[dict[str, Any]],
    ns: list[int],
    tries: Iterable[dict[str, Any]],
) -> None:
    """Append ``rows`` of ``side``: one sweep for all; where it refuses, one per (dtype, d)
    group, then per row; a row every try refuses holds predict()'s message."""
    tries = list(tries)
    groups = [rows] if len(rows) > 1 else []
    groups += [list(g) for _, g in itertools.groupby(rows, key=lambda r: (r["dtype"], r["d"]))]
    groups += [[r] for r in rows]
    done: dict[int, dict[str, Any]] = {}  # row position -> result slice holder
    position = {id(r): i for i, r in enumerate(rows)}
    for group in groups:
        if all(position[id(r)] in done for r in group):
            continue
        for fixed in tries:
            try:
                result = _sweep_rows(spec, group, ns, **fixed)
            except PerfmodelError:
                continue
            for j, r in enumerate(group):
                done[position[id(r)]] = dict(result=result, at=j)
            break
    for i, r in enumerate(rows):
        if i in done:
            part = _slice(done[i]["result"], done[i]["at"], len(ns))
            tables.add_rows(side, part, 1)
        else:
            tables.rows[side].append(tables.error(_refusal(spec, r, ns, tries[0])))


def _slice(result: dict[str, np.ndarray], row: int, width: int) -> dict[str, np.ndarray]:
    part = slice(row * width, (row + 1) * width)
    return {k: np.asarray(v)[part] for k, v in result.items()}


def _refusal(spec: HardwareSpec, row: dict[str, Any], ns: list[int], fixed: dict[str, Any]) -> str:
    """predict()'s message for a row sweep refuses (at the largest grid n)."""
    try:
        predict(n=ns[-1], hw=spec, **row_arguments(row), **fixed)
    except PerfmodelError as e:
        return str(e)
    return f"the engine refuses this shape at some n in {ns[0]}..{ns[-1]}"


def _block_key(*parts: str) -> str:
    return "|".join(parts)


def build_tables(grid: Grid) -> dict[str, Any]:
    """Every table of the grid, computed by sweep(), encoded as the page reads them."""
    grid = grid.check()
    ns = grid.n()
    tables = _Tables(_Pool(len(ns)))
    blocks: dict[str, dict[str, int]] = {a: {} for a in SIDES}
    devices = {}
    for name in grid.devices():
        spec = load_hardware(name)
        devices[name] = device_entry(spec, grid)
        rows = shape_rows(grid, devices[name]["dtypes"])
        for cal in devices[name]["calibrations"]:
            calibration = None if cal == "default" else cal
            for impl, mode in itertools.product(NAIVE_IMPLEMENTATIONS, MODES):
                blocks["naive"][_block_key(name, cal, impl, mode)] = len(tables.rows["naive"])
                for mask in mask_settings(grid):
                    tries = [
                        dict(calibration=calibration, naive=impl, mode=mode, kernel=k, **mask)
                        for k in (None, *flash_families())
                    ]
                    _table(tables, "naive", spec, rows, ns, tries)
            for kernel, mode in itertools.product(flash_families(), MODES):
                blocks["flash"][_block_key(name, cal, kernel, mode)] = len(tables.rows["flash"])
                for mask in mask_settings(grid):
                    fixed = dict(calibration=calibration, kernel=kernel, mode=mode, **mask)
                    _table(tables, "flash", spec, rows, ns, [fixed])
    offsets, rows_blob = tables.encoded_rows()
    return {
        "n": ns,
        "axes": {
            "d": list(grid.d),
            "heads": [list(p) for p in grid.heads],
            "batch": list(grid.batch),
            "causal": [False, True],
            "window": list(grid.windows),
            "documents": list(grid.documents),
            "prefix_lm": list(grid.prefixes),
        },
        "devices": devices,
        "columns": tables.columns,
        "labels": tables.labels,
        "kinds": tables.kinds,
        "errors": tables.errors,
        "blocks": blocks,
        "offsets": offsets,
        "rows": rows_blob,
        "vectors": len(tables.pool.vectors),
        "table_rows": sum(len(r) for r in tables.rows.values()),
        "pool": tables.pool.encoded(),
    }


# --- what is not a table ------------------------------------------------------------------
def dtypes(spec: HardwareSpec) -> list[str]:
    """The dtypes with a matrix peak on ``spec``."""
    return [t for t in BYTES_PER_ELEMENT if _has_peak(spec, t)]


def _has_peak(spec: HardwareSpec, dtype: str) -> bool:
    try:
        spec.peak(dtype)
    except PerfmodelError:
        return False
    return True


def profile_names(spec: HardwareSpec) -> list[str]:
    """The calibration choices valid on ``spec``: "default", then the profiles fitted on it."""
    out = ["default"]
    for name in known_calibrations():
        if name in out:
            continue
        try:
            calibration_profiles(name, spec)
        except PerfmodelError:
            continue  # fitted on another device
        out.append(name)
    return out


def opening_dtype(spec: HardwareSpec) -> str:
    """The dtype the page opens with on ``spec``: predict()'s default where the device has it."""
    default = inspect.signature(predict).parameters["dtype"].default
    names = dtypes(spec)
    return default if default in names else names[0]


def device_entry(spec: HardwareSpec, grid: Grid) -> dict[str, Any]:
    """A device as the page shows it: its choices, its HBM and its roofs' full rates (FP8
    as run: the device's FP8 roofs)."""
    names = [t for t in dtypes(spec) if t in grid.dtypes] or [opening_dtype(spec)]
    entry: dict[str, Any] = {
        "dtypes": dtype_choices(names),
        "opening_dtype": opening_dtype(spec) if opening_dtype(spec) in names else names[0],
        "calibrations": profile_names(spec),
        "hbm_capacity_bytes": spec.hbm_capacity_bytes,
        "rates": {
            t: {
                str(r): (None if v is None else float(v))
                for r, v in roof_rates(spec, spec.peak(t)).items()
            }
            for t in names
        },
    }
    if "fp8" in names:
        entry["rates"][AS_RUN] = entry["rates"]["fp8"]
    return entry


def auto_kernel(spec: HardwareSpec, calibration: str | None) -> dict[str, str]:
    """The family predict() picks on ``spec`` when ``kernel`` is not given
    (``flash_family``): ``{"kernel": name}``, or ``{"error": message}`` where predict()
    refuses it (a TPU: no default family)."""
    try:
        return {"kernel": flash_family(None, calibration, spec).name}
    except PerfmodelError as e:
        return {"error": str(e)}


def flash_families() -> list[str]:
    """The kernel families the page offers for the fused side."""
    return [k for k in known_kernels() if load_kernel(k).algorithm == "flash"]


def headlines(grid: Grid) -> dict[str, dict[str, Any]]:
    """The chapter's sentence and the n→∞ limit (:func:`perfmodel.report.conclusions`)
    at the page's opening setting on each device, causal or not, by
    ``"device|dtype|causal"`` (empty where the grid lacks the opening shape)."""
    from perfmodel.report.conclusions import conclusions
    from perfmodel.shape import Shape

    opening = Shape()
    if (
        opening.d not in grid.d
        or (opening.h, opening.h) not in grid.heads
        or opening.batch not in grid.batch
    ):
        return {}
    out = {}
    for name in grid.devices():
        spec = load_hardware(name)
        dtype = device_entry(spec, grid)["opening_dtype"]
        kernel = auto_kernel(spec, None).get("kernel")
        for causal in (False, True):
            if kernel is None:  # predict() refuses the opening setting here: no headline
                continue
            shape = Shape(dtype=dtype, causal=causal, kernel=kernel)
            try:
                c = conclusions(spec, shape)
            except PerfmodelError:
                continue
            key = _block_key(name, dtype, str(int(causal)))
            out[key] = {"headline": c.headline(), "asymptote": c.asymptote.value}
    return out


#: The shape fields of a measured point the page matches against its controls.
POINT_FIELDS = ("n", "kv_len", "d", "h", "h_kv", "batch", "dtype", "causal")


def measured_points(paths: list[str | Path]) -> list[dict[str, Any]]:
    """Measured attention points of the files, as the page overlays them."""
    from perfmodel.validation.compare import ALGORITHM_OF
    from perfmodel.validation.measured import load_measurements

    out = []
    for run, p in load_measurements(list(paths)):
        algorithm = ALGORITHM_OF.get(str(p.implementation))
        time = p.device_time_s or p.median_s
        if algorithm not in ALGORITHMS or p.status != "ok" or time is None:
            continue
        try:
            device = load_hardware(run.device_name).name
        except PerfmodelError:
            continue
        shape = p.shape()
        out.append(
            dict(
                device=device,
                implementation=str(p.implementation),
                algorithm=algorithm,
                **{k: getattr(shape, k) for k in POINT_FIELDS},
                time_s=time,
                basis="device" if p.device_time_s else "median",
            )
        )
    return out


def check_controls() -> list[str]:
    """predict() parameters the page neither offers nor lists as left out (empty: none)."""
    known = CONTROLS.keys() | NOT_SHOWN.keys()
    return [p for p in inspect.signature(predict).parameters if p not in known]


# --- the page -----------------------------------------------------------------------------
ASSETS = Path(__file__).with_name("explore_page")
#: The page's scripts, in order: the table reader (no DOM: tests run it in Node.js), then
#: the controls and charts.
SCRIPTS = ("tables.js", "page.js")


def build_data(
    grid: Grid | None = None, measurements: list[str | Path] | None = None
) -> dict[str, Any]:
    """Everything the page reads, as one JSON-able dict."""
    missing = check_controls()
    if missing:
        raise PerfmodelError(
            f"perfmodel explore has no control for predict() argument(s) {missing}"
        )
    grid = (grid or Grid()).check()
    measured = measured_points(measurements or [])  # a bad file is refused before the work
    data = build_tables(grid)
    data |= {
        "naive": list(NAIVE_IMPLEMENTATIONS),
        "kernels": flash_families(),
        "auto_kernel": {
            name: {
                c: auto_kernel(load_hardware(name), None if c == "default" else c)
                for c in device["calibrations"]
            }
            for name, device in data["devices"].items()
        },
        "modes": list(MODES),
        "n_reference": N_REFERENCE,
        "opening": {"n": N_REFERENCE, "hw": "H200 SXM"},
        "headlines": headlines(grid),
        "measured": measured,
    }
    return data


def build_page(grid: Grid | None = None, measurements: list[str | Path] | None = None) -> str:
    """The whole page as one HTML string (no network access needed to view it)."""
    return page_html(build_data(grid, measurements))


def page_html(data: dict[str, Any]) -> str:
    """The page showing ``data`` (:func:`build_data`'s)."""
    page = (ASSETS / "page.html").read_text(encoding="utf-8")
    script = "\n".join((ASSETS / s).read_text(encoding="utf-8") for s in SCRIPTS)
    generated = f"const DATA = {json.dumps(data, allow_nan=False)};\n"
    return (
        page.replace("/*DATA*/", generated)
        .replace("/*PAGE_JS*/", script)
        .replace("{{TITLE}}", html.escape("perfmodel explore"))
    )


def write_page(
    path: str | Path,
    measurements: list[str | Path] | None = None,
    grid: Grid | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Write the page atomically; the path and the data it shows."""
    from perfmodel.atomic import write_text

    out = Path(path)
    data = build_data(grid, measurements)
    write_text(out, page_html(data))
    return out, data


def summary(data: dict[str, Any]) -> str:
    """What a page holds: its distinct column vectors, the n grid, rows and devices."""
    return (
        f"{data['vectors']:,} column vectors of {len(data['n'])} n, "
        f"{data['table_rows']:,} table rows, {len(data['devices'])} "
        f"device{'' if len(data['devices']) == 1 else 's'}"
    )


def size_of(path: str | Path) -> str:
    """``"4.2 MB"``: a page's size for the command's message."""
    size = Path(path).stat().st_size
    return f"{size / 1e6:.1f} MB" if size >= 1e5 else f"{math.ceil(size / 1e3)} kB"
