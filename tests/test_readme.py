"""The README holds true: every command it shows runs, and what it quotes is printed.

Each command the README shows (a line of a ``bash`` block, a ``$ command`` line of a
``text`` block, or an inline code span starting with ``perfmodel `` or ``python ``; a
span of two words, ``perfmodel report``, names a subcommand, and the test checks the
CLI has it) is
listed in :data:`HOW` with how this test holds it:

- ``run``: run as written (``python`` is this interpreter), exit 0;
- ``reduced``: run with its output path moved under a temporary folder (the committed
  figure is not rewritten here) and, for ``perfmodel explore``, a one-device grid
  (:data:`SMALLER`: the default grid takes minutes here), exit 0 and the file written;
- ``parse``: too slow or needs a GPU here (``perfmodel calibrate``: about 3 minutes of
  microbenchmarks on the GPU): its arguments parse with the CLI's own parser, and
  ``--help`` exits 0;
- ``ci``: the install and test commands of the quick start, which ``.ci/run`` runs
  itself: held by checking that ``.ci/run`` runs them.

A command in the README that :data:`HOW` does not list fails the test, and so does a
quoted output block that differs from what its command prints, or a figure in the
argument table that its command does not print.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")

#: How each command the README shows is held (see the module docstring).
HOW: dict[str, str] = {
    "pip install -e .": "ci",
    'pip install -e ".[test,browser,notebook]"': "ci",
    "python -m pytest": "ci",
    "perfmodel predict --n 8192 --hw a100": "run",
    "perfmodel --help": "run",
    "perfmodel kernels list": "run",
    "python examples/why_flash_is_fast.py": "run",
    "python examples/plot_roofline.py docs/figures/roofline-h200.png": "reduced",
    "perfmodel explore --out explore.html": "reduced",
    "python -m kernel_bench.mosaic_check --table specs/measurements/h200-mosaic-call*.json": "run",
    "python -m kernel_bench.bench_backward --table "
    "specs/measurements/h200-backward-2026-11-30.json": "run",
    "perfmodel calibrate --out specs/devices/my-gpu.ceilings.toml --device h100": "parse",
}

#: Options that shrink a reduced command's work (appended to it).
SMALLER = {
    "perfmodel explore --out explore.html": " --hw h200 --dtype bf16 --d 128 --heads 1:1"
    " --steps-per-octave 1",
}

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_SPAN = re.compile(r"`([^`\n]+)`")


def _fences(lang: str) -> list[str]:
    return [body for kind, body in _FENCE.findall(TEXT) if kind == lang]


def _prose() -> str:
    """The README without its fenced blocks."""
    return _FENCE.sub("", TEXT)


def _shown_commands() -> set[str]:
    """Every shell command the README shows."""
    found: set[str] = set()
    for body in _fences("bash"):
        for line in body.splitlines():
            line = line.split("  #", 1)[0].strip()
            found.update(part.strip() for part in line.split("&&") if part.strip())
    for body in _fences("text"):
        found.update(line[2:].strip() for line in body.splitlines() if line.startswith("$ "))
    for span in _SPAN.findall(_prose()):
        if span.startswith(("perfmodel ", "python ")) and span not in _subcommand_names():
            found.add(span.strip())
    return found


def _subcommand_names() -> set[str]:
    """Spans that name a subcommand (``perfmodel report``) rather than run one."""
    return {s for s in _SPAN.findall(_prose()) if re.fullmatch(r"perfmodel [a-z]+", s)}


def _argv(command: str) -> str:
    """The command for a shell here: ``python`` is this interpreter."""
    if command.startswith("python "):
        return shlex.quote(sys.executable) + command[len("python") :]
    return command


def _env() -> dict[str, str]:
    """This interpreter's scripts first on PATH (``perfmodel``), this tree first on
    PYTHONPATH, no display for matplotlib."""
    env = dict(os.environ, MPLBACKEND="Agg")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


@functools.cache
def _output(command: str) -> str:
    """What a README command prints, run from the repository root (exit 0 asserted)."""
    done = subprocess.run(
        _argv(command),
        shell=True,
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{command!r} exited {done.returncode}:\n{done.stderr[-2000:]}"
    return done.stdout


def test_readme_is_at_most_200_lines():
    assert len(TEXT.splitlines()) <= 200


def test_every_command_the_readme_shows_is_held_here():
    shown = _shown_commands()
    assert shown - set(HOW) == set(), "README commands this test does not hold"
    assert set(HOW) - shown == set(), "commands listed here that the README no longer shows"


@pytest.mark.parametrize("command", sorted(c for c, how in HOW.items() if how == "run"))
def test_command_runs(command):
    assert _output(command).strip(), f"{command!r} printed nothing"


@pytest.mark.parametrize("command", sorted(c for c, how in HOW.items() if how == "reduced"))
def test_command_writing_a_file_runs_into_a_temporary_folder(command, tmp_path):
    words = command.split()
    target = next(w for w in words[1:] if w.endswith((".png", ".html")))
    moved = tmp_path / Path(target).name
    _output(command.replace(target, str(moved)) + SMALLER.get(command, ""))
    assert moved.is_file() and moved.stat().st_size > 1000


@pytest.mark.parametrize("command", sorted(c for c, how in HOW.items() if how == "parse"))
def test_gpu_command_parses(command):
    from perfmodel.cli import build_parser

    words = shlex.split(command)
    assert words[0] == "perfmodel"
    args = build_parser().parse_args(words[1:])
    assert callable(args.func)
    assert "usage:" in _output(f"{words[0]} {words[1]} --help")


def test_every_subcommand_the_readme_names_exists():
    import argparse

    from perfmodel.cli import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    names = _subcommand_names()
    assert names
    assert {n.split()[1] for n in names} <= set(sub.choices)


def test_install_and_test_commands_are_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r'^python3? -m pip install .*-e "\.\[test,browser,notebook\]"', ci, re.M)
    assert re.search(r"^python3? -m pytest\s*$", ci, re.M)
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for extra in ("test", "browser", "notebook", "kernels"):
        assert re.search(rf"^{extra} = \[", pyproject, re.M), extra


def test_quoted_output_is_what_the_command_prints():
    blocks = [b for b in _fences("text") if b.startswith("$ ")]
    assert blocks
    for block in blocks:
        command, _, quoted = block.partition("\n")
        assert _output(command[2:].strip()).rstrip("\n") == quoted.rstrip("\n"), command


def _table(heading: str) -> list[list[str]]:
    """The body rows of the first table under ``heading``, as cells."""
    section = TEXT.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[c.strip() for c in row.strip("|").split(" | ")] for row in rows[2:]]


def test_every_figure_of_the_argument_table_is_printed_by_its_command():
    rows = _table("The chapter's argument, computed")
    assert len(rows) >= 5
    for says, computes, by in rows:
        (command,) = _SPAN.findall(by)
        figures = [s for s in _SPAN.findall(computes) if re.search(r"\d", s)]
        assert figures, f"row {says!r} quotes no figure"
        printed = _output(command)
        missing = [f for f in figures if f not in printed]
        assert not missing, f"{command!r} does not print {missing}"


def test_the_api_block_runs():
    (block,) = _fences("python")
    code = [line for line in block.splitlines() if line.strip()]
    assert len(code) <= 10
    exec(compile(block, "README.md", "exec"), {})


def test_every_link_of_the_readme_exists():
    links = re.findall(r"\]\(([^)#\s]+)\)", TEXT)
    assert links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing
