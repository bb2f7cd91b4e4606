"""Whole-model estimate against the H200 measurement of Llama-3.1-8B (issue 16).

    python3 examples/whole_model.py --predict                      # before the run
    python3 examples/whole_model.py --measured specs/measurements/h200-llama-8b-DATE.json

``--predict`` prints the estimate for every point of ``kernel_bench.bench_llama.PLAN``;
``--measured`` puts each measured point beside its prediction (error = predicted /
measured - 1, on device time), then the chapter's conclusion (3.1.5) measured and
predicted side by side.
"""

from __future__ import annotations

import argparse
import json

from perfmodel.analysis.estimate import estimate
from perfmodel.validation.fitting import relative_error

MODEL, HW = "llama-3.1-8b", "h200"
#: Prefill attention in the benchmark -> (estimate's attention, kernel family).
PREFILL = {"flash": ("flash", "pallas"), "naive": ("naive", "xla"), "cudnn": ("flash", "cudnn")}
PAGE = 64


def predicted(kind: str, impl: str, shape, batch: int = 1):
    """(seconds, estimate) of one benchmark point."""
    if kind == "prefill":
        attention, kernel = PREFILL[impl]
        e = estimate(
            MODEL,
            HW,
            prompt=shape,
            batch=batch,
            attention=attention,
            kernel=kernel,
            check_memory=False,
        )
        return e.ttft_s, e
    b, m = shape
    e = estimate(
        MODEL, HW, prompt=m, batch=b, context=m, kv=impl, page_tokens=PAGE, check_memory=False
    )
    return e.tpot_s, e


def predict_table() -> str:
    from kernel_bench.bench_llama import PLAN

    lines = [
        "| # | phase | attention / KV | shape | predicted time | floor | attention share "
        "| memory (weights+KV+act+scratch) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, (kind, impl, shape) in enumerate(PLAN):
        t, e = predicted(kind, impl, shape)
        if kind == "prefill":
            phase, where, mem = e.prefill, f"b=1 n={shape}", e.memory.total_bytes
            fits = "" if e.memory.fits else " (does not fit)"
        else:
            phase, where = e.decode, f"b={shape[0]} m={shape[1]}"
            mem, fits = e.memory.weights_bytes + e.memory.kv_cache_bytes, ""
        lines.append(
            f"| {i} | {kind} | {impl} | {where} | {t * 1e3:.2f} ms | "
            f"{phase.t_lower_s * 1e3:.2f} ms | {phase.share('attention'):.1%} | "
            f"{mem / 1e9:.1f} GB{fits} |"
        )
    return "\n".join(lines)


def _peak(run: dict, point: dict) -> float | None:
    """Peak device bytes of one point, from XLA's buffer assignment: prefill = weights +
    the K/V of every layer + one chunk's temporaries + the hidden state; decode = bytes in
    use before the call (weights, cache) + one chunk's temporaries and outputs."""
    chunk = point.get("chunk_memory") or {}
    if not chunk:
        return None
    if point["kind"] == "prefill":
        cfg = run["config"]
        tokens = point["batch"] * point["n"]
        kv = 2 * cfg["layers"] * cfg["kv_heads"] * cfg["head_dim"] * 2 * tokens
        weights = run["memory_weights"]["bytes_in_use"]
        return weights + kv + chunk["temp_size_in_bytes"] + tokens * cfg["hidden"] * 2
    before = point["memory_before"]["bytes_in_use"]
    return before + chunk["temp_size_in_bytes"] + chunk["output_size_in_bytes"]


def conclusion(run: dict) -> str:
    """The chapter's sentence, measured and predicted: flash against naive per n."""
    measured = {
        (p["impl"], p["n"]): p for p in run["points"] if p["kind"] == "prefill" and "device_s" in p
    }
    lines = [
        "| n | naive (meas.) | flash (meas.) | throughput gain meas. / pred. "
        "| peak memory meas. / pred. |",
        "|---|---|---|---|---|",
    ]
    for n in sorted({n for _, n in measured}):
        if ("naive", n) not in measured or ("flash", n) not in measured:
            continue
        naive, flash = measured["naive", n], measured["flash", n]
        t_naive, e_naive = predicted("prefill", "naive", n)
        t_flash, e_flash = predicted("prefill", "flash", n)
        gain = naive["device_s"] / flash["device_s"] - 1
        mem = _peak(run, flash) / _peak(run, naive) - 1
        mem_pred = e_flash.memory.total_bytes / e_naive.memory.total_bytes - 1
        lines.append(
            f"| {n} | {naive['device_s'] * 1e3:.1f} ms | {flash['device_s'] * 1e3:.1f} ms | "
            f"{gain:+.0%} / {t_naive / t_flash - 1:+.0%} | {mem:+.0%} / {mem_pred:+.0%} |"
        )
    return "\n".join(lines)


def compare(path: str) -> str:
    with open(path) as f:
        run = json.load(f)
    lines = [
        f"{run['device']}, jax {run['jax']}, commit {run['git_commit']}, chunk {run['chunk']}",
        "",
        "| phase | attention / KV | shape | measured (device) | single call | predicted | error "
        "| tokens/s | HBM GB/s (model bytes) | peak memory |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in run["points"]:
        shape = p["n"] if p["kind"] == "prefill" else (p["batch"], p["m"])
        t_pred, e = predicted(p["kind"], p["impl"], shape, p.get("batch", 1))
        where = (
            f"b={p['batch']} n={p['n']}" if p["kind"] == "prefill" else f"b={p['batch']} m={p['m']}"
        )
        if "device_s" not in p:
            lines.append(
                f"| {p['kind']} | {p['impl']} | {where} | {p.get('error', '?')[:60]} "
                f"| | {t_pred * 1e3:.2f} ms | | | | |"
            )
            continue
        t = p["device_s"]
        phase = e.prefill if p["kind"] == "prefill" else e.decode
        tokens = phase.tokens / t if p["kind"] == "prefill" else p["batch"] / t
        peak = _peak(run, p)
        lines.append(
            f"| {p['kind']} | {p['impl']} | {where} | {t * 1e3:.2f} ms | "
            f"{p['latency_s'] * 1e3:.2f} ms | {t_pred * 1e3:.2f} ms | "
            f"{relative_error(t_pred, t):+.1%} | "
            f"{tokens:,.0f} | {phase.hbm_bytes / t / 1e9:,.0f} | "
            f"{'n/a' if peak is None else f'{peak / 1e9:.1f} GB'} |"
        )
    for s in run.get("skipped", []):
        lines.append(
            f"| {s['kind']} | {s['impl']} | {s['shape']} | not run ({s['why']}) | | | | | | |"
        )
    return "\n".join(lines) + "\n\nFlash against naive (prefill, batch 1):\n\n" + conclusion(run)


def _peer_time(peers: dict, tool: str, kind: str, key: str) -> float | None:
    entry = peers.get(tool, {}).get(kind, {}).get(key)
    if entry is None:
        return None
    if tool == "llm-viewer":
        return entry["time_s"]
    return entry["prefill_s" if kind == "prefill" else "decode_s"]


def peer_table(measured_path: str, peers_path: str) -> str:
    """Measured against ours, LLM-Viewer and llm-analysis (error = predicted / measured - 1)."""
    with open(measured_path) as f:
        run = json.load(f)
    with open(peers_path) as f:
        peers = json.load(f)
    lines = [
        f"LLM-Viewer {peers['llm-viewer'].get('commit', '?')[:12]}, "
        f"llm-analysis {peers['llm-analysis'].get('commit', '?')[:12]}",
        "",
        "| phase | shape | measured | ours | LLM-Viewer | llm-analysis |",
        "|---|---|---|---|---|---|",
    ]
    for p in run["points"]:
        if "device_s" not in p or p["impl"] in ("cudnn", "contiguous"):
            continue
        if p["kind"] == "prefill":
            shape, key = p["n"], f"{p['impl']}:{p['n']}"
            where = f"{p['impl']} attention, b=1 n={p['n']}"
        else:
            shape, key = (p["batch"], p["m"]), f"{p['batch']}:{p['m']}"
            where = f"paged, b={p['batch']} m={p['m']}"
        t = p["device_s"]
        cells = [predicted(p["kind"], p["impl"], shape)[0]]
        cells += [
            _peer_time(peers, tool, p["kind"], key) for tool in ("llm-viewer", "llm-analysis")
        ]
        shown = ["n/a" if c is None else f"{c * 1e3:.2f} ms ({c / t - 1:+.0%})" for c in cells]
        lines.append(f"| {p['kind']} | {where} | {t * 1e3:.2f} ms | " + " | ".join(shown) + " |")
    return "\n".join(lines)


def plot_measured(measured_path: str, path: str) -> None:
    """Prefill tokens/s against n, measured (markers) and predicted (lines), per attention;
    and the decode step, measured against predicted, per (batch, context)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(measured_path) as f:
        run = json.load(f)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    grid = [512, 1024, 2048, 4096, 8192, 16384, 32768]
    for impl, color in (("naive", "C0"), ("flash", "C1"), ("cudnn", "C2")):
        pred = [(n, n / predicted("prefill", impl, n)[0]) for n in grid]
        left.plot(*zip(*pred, strict=True), "-", color=color, label=f"{impl} (estimate)")
        pts = [
            (p["n"], p["n"] / p["device_s"])
            for p in run["points"]
            if p["kind"] == "prefill" and p["impl"] == impl and "device_s" in p
        ]
        if pts:
            left.plot(*zip(*pts, strict=True), "o", color=color, label=f"{impl} (measured)")
    left.set(
        xscale="log",
        xlabel="prompt tokens n (batch 1)",
        ylabel="prefill tokens/s",
        title="Llama-3.1-8B prefill on the H200",
    )
    for p in run["points"]:
        if p["kind"] != "decode" or "device_s" not in p:
            continue
        t_pred = predicted("decode", p["impl"], (p["batch"], p["m"]))[0]
        marker = "s" if p["impl"] == "paged" else "^"
        right.plot(t_pred * 1e3, p["device_s"] * 1e3, marker, color="C1" if marker == "s" else "C0")
        right.annotate(
            f"b={p['batch']} m={p['m']}",
            (t_pred * 1e3, p["device_s"] * 1e3),
            fontsize=7,
            xytext=(3, 3),
            textcoords="offset points",
        )
    lim = [0, 25]
    right.plot(lim, lim, "k:", lw=1)
    right.plot([], [], "s", color="C1", label="paged (our kernel)")
    right.plot([], [], "^", color="C0", label="contiguous (XLA einsums)")
    right.set(
        xlim=lim,
        ylim=lim,
        xlabel="predicted time per output token (ms)",
        ylabel="measured (ms)",
        title="decode step",
    )
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--predict", action="store_true")
    ap.add_argument("--measured", default=None)
    ap.add_argument("--peers", default=None, help="with --measured: the peers' JSON")
    ap.add_argument("--plot", default=None, help="with --measured: a figure of both phases")
    args = ap.parse_args()
    if args.predict:
        print(predict_table())
    if args.measured and args.plot:
        plot_measured(args.measured, args.plot)
    if args.measured and args.peers:
        print(peer_table(args.measured, args.peers))
    elif args.measured:
        print(compare(args.measured))


if __name__ == "__main__":
    main()
