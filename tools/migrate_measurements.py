"""Rewrite a measurement file of the 2026-11-30 backward runs in the one measurement schema.

``kernel_bench/bench_backward.py`` wrote its points with field names of its own
(``xla_naive``, no ``median_s``, no run ceilings). This tool maps them onto
``perfmodel.validation.measured`` and writes the file back atomically, every timing
kept as it was measured:

* ``implementation = "xla_naive"`` is ``naive_jit`` (``pallas_kernels.naive.naive_attention_jit``,
  as ``bench_backward.attention_fn`` calls it);
* ``median_s`` is the device time (``time_basis = "device"``): what these runs timed;
* ``backward_config`` stays (``measured.BackwardConfig``); a point whose backward launch is
  not the family's default (``specs/kernels/pallas-triton.toml`` ``[backward]``) is marked
  ``tuning`` and kept out of validation and fits;
* the runs measured no ceilings: ``ceilings`` is left out (``Run.ceilings`` None);
* ``--backward-family F``: our backward and training-step points ran ``F``'s backward
  (``Point.backward_family``): the runs before the Mosaic backward existed (2026-12-02)
  ran the Triton one after either forward.

    python tools/migrate_measurements.py specs/measurements/h200-backward-2026-11-30.json
    python tools/migrate_measurements.py --backward-family pallas-triton FILE...
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from perfmodel.atomic import write_json
from perfmodel.catalog.kernels import load_kernel
from perfmodel.validation.measured import MeasurementFile

RENAMED = {"xla_naive": "naive_jit"}


def _is_default(config: dict, d: int, causal: bool) -> bool:
    """Whether a backward launch is our family's stated default at head dim ``d``."""
    owner = load_kernel("pallas-triton").backward
    assert owner is not None
    tile = owner.tile_for(d, causal=causal)
    return (
        config.get("block_q"),
        config.get("block_k"),
        config.get("dq_block_q", tile.dq_block_q),
        config.get("dq_block_k", tile.dq_block_k),
        config.get("num_warps"),
        config.get("num_stages"),
        config.get("dq_num_warps") or config.get("num_warps"),
        config.get("dq_num_stages") or config.get("num_stages"),
        config.get("dq", owner.dq),
    ) == (
        tile.block_q,
        tile.block_k,
        tile.dq_block_q,
        tile.dq_block_k,
        tile.warps,
        tile.stages,
        tile.dq_warps,
        tile.dq_stages,
        owner.dq,
    )


def migrate_point(p: dict, backward_family: str | None = None) -> dict:
    out = dict(p)
    ours = p["implementation"] == "pallas_flash" and p.get("phase") in ("backward", "train")
    if backward_family and ours:
        out["backward_family"] = backward_family
    out["implementation"] = RENAMED.get(p["implementation"], p["implementation"])
    if p.get("status") == "ok" and out.get("median_s") is None:
        out["median_s"] = p["device_time_s"]
        out["time_basis"] = "device"
    config = p.get("backward_config")
    if config and not _is_default(config, int(p["d"]), bool(p["causal"])):
        out["tuning"] = True
    return out


def migrate(data: dict, backward_family: str | None = None) -> dict:
    runs = [
        {**run, "points": [migrate_point(p, backward_family) for p in run["points"]]}
        for run in data["runs"]
    ]
    return {"schema_version": data.get("schema_version", 1), "runs": runs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--backward-family", help="the family whose backward our points ran")
    args = ap.parse_args(argv)
    for path in args.paths:
        new = migrate(json.loads(path.read_text()), args.backward_family)
        MeasurementFile.model_validate(new)  # refuses to write what the schema refuses
        write_json(path, new)
        points = sum(len(r["points"]) for r in new["runs"])
        tuning = sum(bool(p.get("tuning")) for r in new["runs"] for p in r["points"])
        print(f"{path}: {points} points in the schema ({tuning} tuning variants)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
