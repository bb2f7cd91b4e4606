"""LLM-Viewer and llm-analysis on the whole-model benchmark's shapes (issue 16).

Runs the two peers' own code, unmodified, from local checkouts, on Llama-3.1-8B on the
H200 at the points of ``kernel_bench.bench_llama.PLAN``, and writes their predictions
as JSON. Run it with a Python that has their requirements (``fire``, ``transformers``),
not this project's::

    python3 -m venv /tmp/peervenv && /tmp/peervenv/bin/pip install fire transformers
    /tmp/peervenv/bin/python benchmarks/peers_whole_model.py \
        --llm-viewer /tmp/llmviewer --llm-analysis /tmp/llmanalysis --out FILE.json

Neither peer ships an H200 or Llama-3.1-8B entry. Both are given as data, through the
peers' own lookup tables (LLM-Viewer: ``hardware_params`` and a local Hugging Face
``config.json``; llm-analysis: ``gpu_configs`` and a ``ModelConfig`` JSON file),
with the figures of ``specs/devices/h200-sxm.toml`` and ``specs/models/llama-3.1-8b.toml``
(read with ``tomllib``). Everything else is their defaults: no efficiency factors
(both assume 100 % of peak unless told otherwise), their own attention accounting.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The benchmark's points (kernel_bench/bench_llama.py PLAN), without importing jax.
PREFILL_N = (512, 1024, 4096, 8192, 16384, 32768)
DECODE = ((16, 4096), (1, 8192), (64, 2048), (1, 32768), (64, 8192))


def _toml(path: str) -> dict:
    return tomllib.loads((ROOT / path).read_text())


def _commit(repo: str) -> str:
    return subprocess.run(
        ["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def hf_config_dir(model: dict) -> str:
    """A local Hugging Face ``config.json`` for the model (its published fields)."""
    folder = Path(tempfile.mkdtemp()) / "Llama-3.1-8B"
    folder.mkdir()
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": model["hidden"],
        "intermediate_size": model["intermediate"],
        "num_attention_heads": model["heads"],
        "num_key_value_heads": model["kv_heads"],
        "num_hidden_layers": model["layers"],
        "vocab_size": model["vocab"],
        "head_dim": model["head_dim"],
        "max_position_embeddings": model["max_context_tokens"],
        "tie_word_embeddings": model["tie_embeddings"],
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "torch_dtype": "bfloat16",
    }
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def llm_viewer(repo: str, model: dict, hw: dict) -> dict:
    os.chdir(repo)
    sys.path.insert(0, repo)
    from hardwares.hardware_params import hardware_params
    from model_analyzer import ModelAnalyzer

    hardware_params["nvidia_H200_SXM"] = {
        "bandwidth": hw["hbm_bandwidth_bytes_per_s"],
        "FP16": hw["peak_flops_per_s"]["bf16"],
        "INT8": hw["peak_flops_per_s"]["fp8"],
        "onchip_buffer": hardware_params["nvidia_H100_SXM"]["onchip_buffer"],  # same die
    }
    analyzer = ModelAnalyzer(hf_config_dir(model), "nvidia_H200_SXM")
    out: dict = {"commit": _commit(repo), "prefill": {}, "decode": {}}
    for n in PREFILL_N:
        for flash in (False, True):
            r = analyzer.analyze(
                seqlen=n, batchsize=1, w_bit=16, a_bit=16, kv_bit=16, use_flashattention=flash
            )["total_results"]["prefill"]
            key = f"{'flash' if flash else 'naive'}:{n}"
            out["prefill"][key] = {
                "time_s": r["inference_time"],
                "memory_bytes": r["memory_consumption"],
            }
    for b, m in DECODE:
        r = analyzer.analyze(
            seqlen=m, batchsize=b, w_bit=16, a_bit=16, kv_bit=16, use_flashattention=True
        )["total_results"]["decode"]
        out["decode"][f"{b}:{m}"] = {
            "time_s": r["inference_time"],
            "memory_bytes": r["memory_consumption"],
        }
    sys.path.remove(repo)
    return out


def llm_analysis(repo: str, model: dict, hw: dict) -> dict:
    sys.path.insert(0, repo)
    config = importlib.import_module("llm_analysis.config")
    analysis = importlib.import_module("llm_analysis.analysis")
    config.gpu_configs["h200-sxm-141gb"] = config.GPUConfig(
        name="h200-sxm-141gb",
        mem_per_GPU_in_GB=hw["hbm_capacity_bytes"] / 1e9,
        hbm_bandwidth_in_GB_per_sec=hw["hbm_bandwidth_bytes_per_s"] / 1e9,
        intra_node_bandwidth_in_GB_per_sec=450,  # unused at tp = 1 (their H100 SXM value)
        intra_node_min_message_latency=8e-06,
        peak_fp16_TFLOPS=hw["peak_flops_per_s"]["bf16"] / 1e12,
    )
    model_json = Path(tempfile.mkdtemp()) / "llama-3.1-8b.json"
    model_json.write_text(
        json.dumps(
            {
                "name": "meta-llama_Llama-3.1-8B",
                "num_layers": model["layers"],
                "n_head": model["heads"],
                "hidden_dim": model["hidden"],
                "vocab_size": model["vocab"],
                "max_seq_len": model["max_context_tokens"],
                "num_key_value_heads": model["kv_heads"],
                "ffn_embed_dim": model["intermediate"],
                "model_type": "llama",
                "mlp_gated_linear_units": True,  # SwiGLU: what their HF reader sets for Llama-3
            }
        )
    )
    out: dict = {"commit": _commit(repo), "prefill": {}, "decode": {}}
    points = [("prefill", 1, n) for n in PREFILL_N] + [("decode", b, m) for b, m in DECODE]
    for kind, b, n in points:
        s = analysis.infer(
            model_name=str(model_json),
            gpu_name="h200-sxm-141gb",
            dtype_name="w16a16e16",
            batch_size_per_gpu=b,
            seq_len=n,
            num_tokens_to_generate=1,
            log_level="ERROR",
        )
        entry = {
            "prefill_s": s["prefill_latency"],
            "decode_s": s["decode_latency"],
            "weights_bytes": s["weight_memory_per_gpu"],
            "kv_cache_bytes": s["kv_cache_memory_per_gpu"],
            "prefill_activation_bytes": s["prefill_activation_memory_per_gpu"],
        }
        # its inference path has no naive/flash switch: prefill rows are keyed "flash"
        out[kind][f"flash:{n}" if kind == "prefill" else f"{b}:{n}"] = entry
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llm-viewer", required=True)
    ap.add_argument("--llm-analysis", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    model = _toml("specs/models/llama-3.1-8b.toml")
    hw = _toml("specs/devices/h200-sxm.toml")
    result = {}
    for name, fn, repo in (
        ("llm-analysis", llm_analysis, args.llm_analysis),
        ("llm-viewer", llm_viewer, args.llm_viewer),
    ):
        try:
            result[name] = fn(os.path.abspath(repo), model, hw)
        except Exception as err:  # noqa: BLE001 - a peer that cannot run is a result too
            result[name] = {"error": f"{type(err).__name__}: {err}"}
    out = Path(args.out) if os.path.isabs(args.out) else ROOT / args.out
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1)[:3000])


if __name__ == "__main__":
    main()
