"""Context parallelism on paper: scaling to 1024 H200s and where splitting starts to pay.

    python3 examples/parallel_scaling.py > /tmp/scaling.md

Prints markdown: for each scheme, the model's time, speed-up and efficiency on
1, 2, 4, 8, 64 and 1024 devices at a fixed total n (strong scaling; NVLink inside
a node of 8, the InfiniBand share of one GPU past it), and the crossover n where a
split over 2 and 8 devices first beats one. Model: ``perfmodel.parallel`` with the
fitted single-GPU profile ``h200-pallas_flash`` and the links measured on the
``nvidia-h200-x2`` machine (specs/devices/h200-sxm.toml).
"""

from __future__ import annotations

from perfmodel.parallel import crossover_n
from perfmodel.report.parallel import scaling_table

HW = "h200"
PROFILE = "h200-pallas_flash"
DEVICES = (2, 4, 8, 64, 1024)
#: Llama-3.1-70B's attention shape (64 query heads, 8 K/V heads, d = 128), causal.
SHAPE = dict(h=64, h_kv=8, d=128, causal=True, dtype="bf16", calibration=PROFILE)


def scaling(n: int) -> str:
    parts = []
    for scheme in ("ring", "allgather", "ulysses"):
        table = scaling_table(HW, n=n, devices=DEVICES, scheme=scheme, **SHAPE)
        parts.append(f"### {scheme}, n = {n:,}\n\n{table}\n")
    return "\n".join(parts)


def crossovers() -> str:
    rows = ["| scheme | cp = 2 | cp = 8 |", "|---|---|---|"]
    for scheme in ("ring", "allgather", "ulysses"):
        cells = []
        for cp in (2, 8):
            n = crossover_n(HW, cp=cp, scheme=scheme, **SHAPE)
            cells.append("never (up to 4M)" if n is None else f"{n:,}")
        rows.append(f"| {scheme} | {' | '.join(cells)} |")
    return "\n".join(rows)


def main() -> None:
    print(scaling(1 << 20))
    print(scaling(1 << 17))
    print("### Crossover n (the split beats one device from this n)\n")
    print(crossovers())


if __name__ == "__main__":
    main()
