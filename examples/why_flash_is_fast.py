"""The chapter's argument, step by step, with every number computed by perfmodel.

    python examples/why_flash_is_fast.py

Its output is quoted in README.md (tests/test_readme.py checks each quoted figure).
"""

from __future__ import annotations

import sympy as sp

import perfmodel
from perfmodel import symbols as S
from perfmodel.costs import symbolic, terms
from perfmodel.units import si


def _fastest_measured(**shape: object) -> str:
    """The fastest committed H200 forward measurement at ``shape`` (any implementation,
    tile or dtype; device time where the point has it), with where it comes from: a
    reference figure points to its measurement."""
    from perfmodel.catalog.data import data_dir
    from perfmodel.validation.measured import load_measurements

    # The forward sweeps: synchronous timings (h200-2026-11-29) and device time (devtime).
    folder = data_dir("measurements")
    files = sorted([*folder.glob("h200-2*.json"), *folder.glob("h200-devtime-*.json")])
    hits = [
        (p.device_time_s or p.min_s or p.median_s, p, run)
        for run, p in load_measurements(files)
        if p.status == "ok" and all(getattr(p, k) == v for k, v in shape.items())
    ]
    if not hits:
        return "none committed"
    t, p, run = min(hits, key=lambda hit: hit[0])
    return f"{si(t, 's')} ({p.implementation}, {p.dtype}, run {run.run_id}, {p.basis()} time)"


def _intensity_limits() -> tuple[sp.Expr, sp.Expr]:
    naive = sp.limit(symbolic("naive").intensity.subs(S.m, S.n), S.n, sp.oo)
    no_cache = symbolic("flash", l2=False).intensity.subs(S.m, S.n)
    flash = sp.limit(no_cache.replace(sp.ceiling, lambda x: x), S.n, sp.oo)
    return sp.simplify(naive), sp.simplify(flash)


def main() -> None:
    print("1. The chapter's worked numbers (d=128, fp16, one head, batch 1)")
    for n in (4096, 8192):
        p = perfmodel.predict(n=n, hw="a100")
        s_bytes = p.naive.extra_memory_bytes / 2
        print(
            f"   n={n}: S = {si(s_bytes, 'B')}, S+P = {int(p.naive.extra_memory_bytes):,} B, "
            f"O = {si(n * 128 * 2, 'B')}"
        )

    naive_lim, flash_lim = _intensity_limits()
    at = {S.d: 128, S.s: 2, S.block_q: 128, S.block_k: 128}
    print("\n2. Arithmetic intensity as n -> oo (FLOP per HBM byte)")
    print(f"   naive: {naive_lim} = {float(naive_lim.subs(at)):.1f} at d=128, fp16")
    print(
        f"   flash, every K/V re-read from HBM: {flash_lim} = "
        f"{float(flash_lim.subs(at)):.1f} at 128x128 tiles"
    )
    for hw in ("a100", "h100", "h200"):
        spec = perfmodel.load_hardware(hw)
        print(f"   ridge point of {spec.name}: {spec.ridge_point('fp16'):.0f}")

    print("\n3. Flash moves fewer HBM bytes than naive (per head, m = n, no cache) iff")
    print("   d*(ceil(n/B_r) - 1) <= 2n - 2/s; e.g. n=4096, d=256:")
    for bq in (16, 64, 128):
        p = perfmodel.predict(n=4096, hw="h200", d=256, block_q=bq, block_k=16)
        print(
            f"   B_r={bq:>3}: flash {si(p.flash.hbm_bytes_no_cache, 'B')} "
            f"vs naive {si(p.naive.hbm_bytes, 'B')}"
        )

    print("\n4. Where the K/V re-reads come from: n=16384, d=128, h=16, fp16, H200, B_r=64")
    p = perfmodel.predict(n=16384, hw="h200", h=16, block_q=64, block_k=64)
    hbm_only = p.flash.hbm_bytes_no_cache / p.hardware.hbm_bandwidth_bytes_per_s
    print(
        f"   every re-read from HBM: {si(p.flash.hbm_bytes_no_cache, 'B')} -> "
        f"{si(hbm_only, 's')} at {si(p.hardware.hbm_bandwidth_bytes_per_s, 'B/s')}"
    )
    print(
        f"   with L2: HBM {si(p.flash.hbm_bytes, 'B')}, L2->SM {si(p.flash.l2_bytes, 'B')}; "
        f"roofs {', '.join(f'{k} {si(v, chr(115))}' for k, v in p.flash.roof_times_s.items())}"
    )
    fastest = _fastest_measured(n=16384, h=16, d=128, batch=1, causal=False)
    print(
        f"   t_lower = {si(p.flash.t_lower_s, 's')} ({p.flash.binding_roof}); "
        f"fastest measured at this shape: {fastest}"
    )

    print("\n5. The gain against n saturates (H200, d=128, fp16, batch 1; speedup = naive/flash)")
    print("   n        one head (chapter)   16 heads")
    for n in (512, 2048, 8192, 32768, 131072):
        one, many = (perfmodel.predict(n=n, hw="h200", h=h) for h in (1, 16))
        print(f"   {n:>6}   {one.speedup:5.2f}x {one.flash.bound:>8}     {many.speedup:5.2f}x")
    sms = perfmodel.load_hardware("h200").sm_count
    print(f"   With one head, flash's grid has n/128 blocks for {sms} SMs: it fills the chip only")
    print(f"   from n = {sms * 128} on; until then naive's finely tiled GEMMs can be faster.")
    kv = terms.kv_head_bytes.subs({S.m: 131072, S.d: 128, S.s: 2})
    print(f"   (at n=131072 one head's K/V is {si(float(kv), 'B')}: more than the L2)")


if __name__ == "__main__":
    main()
