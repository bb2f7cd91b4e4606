"""Where shipped data lives: installed as ``perfmodel.specs``, or ``specs/`` in a checkout."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def data_dir(kind: str) -> Path:
    """The folder of one kind of shipped data: ``devices``, ``models``, ``calibration``, ..."""
    try:
        root = Path(str(resources.files("perfmodel.specs")))
    except ModuleNotFoundError:  # running from a checkout with PYTHONPATH=.
        root = Path(__file__).resolve().parents[2] / "specs"
    return root / kind
