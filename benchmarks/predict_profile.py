"""Where one ``predict()`` of a new shape spends its time: a profile of the engine's steps.

Runs ``predict()`` on random shapes (each once, after a warm-up on others: the
``predict_varied_s`` figure of ``predict_speed.py``) under ``cProfile`` and prints, per
call, the function calls made and each step's share of the time: the launch
(``launch.resolve_point``), the naive and the fused side's evaluation
(``evaluate.evaluate``, ``evaluate.evaluate_flash``), within them the estimates
(``evaluate.estimate_steps``), and the building of the result (``prediction.side_prediction``,
``prediction.unshared``). The shares, not the seconds, are the figure to read (cProfile
adds a cost per call).

    python benchmarks/predict_profile.py [--shapes 400]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats

import numpy as np

import perfmodel

#: (label, module file, function name) of each step reported.
STEPS = (
    ("launch (resolve_point)", "launch.py", "resolve_point"),
    ("naive side (evaluate)", "evaluate.py", "evaluate"),
    ("fused side (evaluate_flash)", "evaluate.py", "evaluate_flash"),
    ("  the estimates (estimate_steps)", "evaluate.py", "estimate_steps"),
    ("  each kernel's roofs (_roofs_from_raw)", "evaluate.py", "_roofs_from_raw"),
    ("result: side_prediction", "prediction.py", "side_prediction"),
    ("result: remembered copy (unshared)", "prediction.py", "unshared"),
)


def shapes(rng: np.random.Generator, k: int) -> list[dict[str, object]]:
    """Random shapes drawn as ``predict_speed.py`` draws them."""
    return [
        dict(
            n=int(rng.integers(1, 32769)),
            d=int(rng.choice([64, 128])),
            h=int(rng.choice([1, 8, 16, 32])),
            batch=int(rng.integers(1, 9)),
            causal=bool(rng.integers(0, 2)),
        )
        for _ in range(k)
    ]


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--shapes", type=int, default=400)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    for s in shapes(rng, 50):
        perfmodel.predict(hw="h200", **s)  # type: ignore[arg-type]
    todo = shapes(rng, args.shapes)
    profile = cProfile.Profile()
    profile.enable()
    for s in todo:
        perfmodel.predict(hw="h200", **s)  # type: ignore[arg-type]
    profile.disable()
    stats = pstats.Stats(profile)
    table = stats.stats  # type: ignore[attr-defined]
    total = stats.total_tt  # type: ignore[attr-defined]
    calls = sum(entry[1] for entry in table.values())
    found: dict[str, float] = {}
    for label, module, name in STEPS:
        cumulative = sum(
            entry[3]
            for (path, _, function), entry in table.items()
            if function == name and path.endswith(f"perfmodel/{module}")
        )
        found[label] = cumulative / total
    print(f"{calls / len(todo):.0f} function calls a new shape ({len(todo)} shapes)")
    for label, share in found.items():
        print(f"{label:<42} {share:6.1%}")
    return found


if __name__ == "__main__":
    main()
