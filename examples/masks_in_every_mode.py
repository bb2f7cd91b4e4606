"""A sliding window in every mode predict() costs, and in decode: the figures of
docs/variants.md ("In every mode").

    python examples/masks_in_every_mode.py
"""

from __future__ import annotations

from perfmodel import predict

PREFILL = dict(hw="h200", h=32, h_kv=8, d=128, dtype="bf16", causal=True)
DECODE = dict(hw="h200", h=32, h_kv=8, d=128, dtype="bf16", batch=8)


def main() -> None:
    for mode in ("forward", "backward", "train"):
        dense = predict(n=32768, mode=mode, **PREFILL).flash
        local = predict(n=32768, mode=mode, window=4095, **PREFILL).flash
        share = local.matmul_flops / dense.matmul_flops
        print(
            f"{mode}: n=32768 causal {dense.time_s * 1e3:.3f} ms -> window 4095 "
            f"{local.time_s * 1e3:.3f} ms; matmul FLOPs x{share:.4f}"
        )
    full = predict(n=1, kv_len=65536, **DECODE).flash
    local = predict(n=1, kv_len=65536, window=4095, **DECODE).flash
    short = predict(n=1, kv_len=4096, **DECODE).flash
    print(
        f"decode batch 8, kv_len 65536: {full.hbm_bytes / 1e6:.1f} MB {full.time_s * 1e6:.1f} us; "
        f"window 4095: {local.hbm_bytes / 1e6:.1f} MB {local.time_s * 1e6:.1f} us; "
        f"kv_len 4096 dense: {short.hbm_bytes / 1e6:.1f} MB {short.time_s * 1e6:.1f} us"
    )


if __name__ == "__main__":
    main()
