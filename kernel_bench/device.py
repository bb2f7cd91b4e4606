"""The device facts the harness takes from a spec file (``specs/devices/``).

The GPU image has no pydantic, so ``perfmodel.catalog.hardware`` cannot load a spec
there: the two numbers the benchmarks need are read with ``tomllib``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from perfmodel.catalog.data import data_dir

#: The device spec file (``specs/devices/``) the benchmarks take SM count and L2 size from.
DEVICE_SPEC = data_dir("devices") / "h200-sxm.toml"


def device_spec(path: Path = DEVICE_SPEC) -> dict:
    """``sm_count`` and ``l2_bytes`` of a device spec TOML, read with ``tomllib``: the
    GPU image has no pydantic, so ``perfmodel.catalog.hardware`` cannot load it there."""
    data = tomllib.loads(Path(path).read_text())
    return {"sm_count": int(data["sm_count"]), "l2_bytes": int(data["l2_bytes"])}
