"""The engine's compiled expressions, printed once and read back by later processes.

A process that finds the code ``lambdify`` printed for its sources runs it without
importing sympy, and gets the same bits as the process that built it with sympy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfmodel import compile as compile_module
from perfmodel.compile import Compiled, compiled_named

ROOT = Path(__file__).resolve().parents[1]

#: One process's predictions (every field, bit-exact) and whether it imported sympy.
CHILD = r"""
import json, sys
import perfmodel
cases = [dict(n=4096, hw="h200", h=16), dict(n=577, hw="h100", d=96, causal=True, kernel="fa3"),
         dict(n=1, kv_len=8192, hw="a100", h=32, h_kv=8, batch=4),
         dict(n=2048, hw="h200", h=8, mode="train")]
out = [perfmodel.predict(**c).model_dump_json(exclude={"hardware"}) for c in cases]
r = perfmodel.sweep("h200", n=[1, 100, 4096], d=[64, 128], causal=[False, True])
out.append(json.dumps({k: [repr(x) for x in r[k].tolist()] for k in sorted(r)}))
print(json.dumps({"sympy": "sympy" in sys.modules, "out": out}))
"""


def _run(cache: Path | str) -> dict[str, object]:
    env = {**os.environ, "PERFMODEL_CACHE": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_second_process_runs_the_printed_code_without_sympy(tmp_path: Path) -> None:
    first = _run(tmp_path)
    assert first["sympy"] is True  # nothing printed yet: built with sympy
    assert list(tmp_path.glob("compiled-*.json"))
    second = _run(tmp_path)
    assert second["sympy"] is False
    assert second["out"] == first["out"]


def test_no_cache_folder_builds_in_process(tmp_path: Path) -> None:
    off = _run("")  # PERFMODEL_CACHE="": no file written or read
    assert off["sympy"] is True
    assert off["out"] == _run(tmp_path)["out"]


def test_printed_code_gives_the_bits_of_the_lambdified(monkeypatch: pytest.MonkeyPatch) -> None:
    from perfmodel.symbols import block_k, d, n

    expr = (n * d / block_k + 3, n**2 / (d + block_k))
    fresh = Compiled(expr)
    entry = compile_module._entry(fresh, None)
    assert entry is not None
    read = Compiled._printed(entry, lambda: expr)
    values = dict(n=np.array([1.0, 7.0, 4096.0]), d=np.array([64.0, 96.0, 128.0]), block_k=64.0)
    for a, b in zip(fresh(**values), read(**values), strict=True):
        assert a.tobytes() == b.tobytes()
    assert fresh(n=7, d=96, block_k=64) == read(n=7, d=96, block_k=64)
    assert repr(read) == repr(fresh)  # the expression, built when asked for


def test_a_changed_source_is_a_new_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for item in compile_module.SOURCES:
        src = compile_module._PACKAGE / item
        dst = tmp_path / "perfmodel" / item
        if src.is_dir():
            for f in src.rglob("*.py"):
                (dst / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
                (dst / f.relative_to(src)).write_bytes(f.read_bytes())
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    monkeypatch.setattr(compile_module, "_PACKAGE", tmp_path / "perfmodel")
    before = compile_module.fingerprint()
    terms = tmp_path / "perfmodel" / "costs" / "terms.py"
    text = terms.read_text()
    assert "SOFTMAX_FLOPS_PER_SCORE = 4" in text
    terms.write_text(text.replace("SOFTMAX_FLOPS_PER_SCORE = 4", "SOFTMAX_FLOPS_PER_SCORE = 5"))
    assert compile_module.fingerprint() != before


def test_an_unwritable_cache_folder_still_compiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from perfmodel.symbols import d, n

    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    cache = compile_module._CacheFile(blocked / "compiled.json")
    monkeypatch.setattr(compile_module, "_cache", lambda: cache)
    monkeypatch.setattr(compile_module, "_NAMED", {})
    fn, extra = compiled_named("test n*d", lambda: (n * d, {"k": 1}))
    assert fn(n=3, d=4) == 12.0 and extra == {"k": 1}
    assert cache.path is None  # gave up writing, kept working


def test_the_cache_folder_keeps_the_newest_files_only(tmp_path: Path) -> None:
    old = []
    for i in range(compile_module.KEEP_FILES + 4):  # files of earlier source versions
        path = tmp_path / f"compiled-{i:020d}.json"
        path.write_text("{}")
        os.utime(path, ns=(10**9 * (i + 1), 10**9 * (i + 1)))
        old.append(path)
    _run(tmp_path)  # a new version's file is written: the oldest others go
    left = sorted(tmp_path.glob("compiled-*.json"))
    assert len(left) == compile_module.KEEP_FILES
    newest = set(old[-(compile_module.KEEP_FILES - 1) :])
    assert newest < set(left)  # the newest earlier ones stay, beside this version's
    assert (set(left) - newest).pop().stat().st_size > 2  # this version's, written now
