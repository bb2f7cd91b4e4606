"""The ``perfmodel`` command line: one subcommand per module under ``perfmodel.commands``.

Each subcommand module has ``register(subparsers)`` and sets ``func`` on its parser.
Bad input prints one line on stderr and exits 2, never a traceback; Ctrl-C prints one
line and exits 130. Arguments are checked by ``perfmodel.arguments`` (the API's own
checks), and output paths before any long work. ``--help`` shows each option's default
and, for names, the known ones (read from the shipped data when help is printed).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from perfmodel.errors import PerfmodelError, cli_spelling

#: Subcommand modules under perfmodel.commands, in the order ``--help`` lists them.
COMMANDS = (
    "predict",
    "estimate",
    "hw",
    "kernels",
    "validate",
    "calibrate",
    "report",
    "explore",
    "diagnose",
    "advise",
)


DESCRIPTION = (
    "Roofline performance model of attention: naive against flash attention on a device, "
    "whole-model serving estimates, and checks against measured points."
)
EPILOG = (
    "start with: perfmodel predict --n 4096 --hw h200 (perfmodel hw list: the devices); "
    "perfmodel COMMAND --help shows each command's options and defaults"
)


def _known(kind: str) -> list[str]:
    """The names a ``{known:KIND}`` placeholder in a help text stands for."""
    if kind == "dtypes":
        from perfmodel.vocabulary import BYTES_PER_ELEMENT

        return list(BYTES_PER_ELEMENT)
    module, function = {
        "devices": ("perfmodel.catalog.hardware", "known_names"),
        "kernels": ("perfmodel.catalog.kernels", "known_kernels"),
        "models": ("perfmodel.catalog.models", "known_models"),
        "calibrations": ("perfmodel.catalog.calibration", "known_calibrations"),
        "workloads": ("perfmodel.catalog.workloads", "known_workloads"),
    }[kind]
    return list(getattr(importlib.import_module(module), function)())


class _Help(argparse.HelpFormatter):
    """Help with each option's default (where it has one) and ``{known:KIND}`` filled in
    with the known names, read only when help is printed."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        for kind in ("dtypes", "devices", "kernels", "models", "calibrations", "workloads"):
            if f"{{known:{kind}}}" in text:
                text = text.replace(f"{{known:{kind}}}", ", ".join(_known(kind)))
        shown = action.default not in (None, False, [], argparse.SUPPRESS)
        if shown and action.option_strings and "default" not in text:
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:  # one line, exit 2, no usage dump
        self.exit(2, f"perfmodel: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from perfmodel import __version__

    parser = _Parser(prog="perfmodel", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"perfmodel {__version__}")
    sub = parser.add_subparsers(
        dest="command", parser_class=_Parser, title="commands", metavar="COMMAND"
    )
    for name in COMMANDS:
        importlib.import_module(f"perfmodel.commands.{name}").register(sub)
    return parser


def _options(parser: argparse.ArgumentParser, command: str) -> dict[str, str]:
    """The command's options by the API argument each one sets (``kv_len`` ->
    ``--kv-len``), its sub-commands' too: how its error messages name them."""
    out: dict[str, str] = {}
    todo = [_subcommand(parser, command)]
    while todo:
        p = todo.pop()
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += list(action.choices.values())
            long = [o for o in action.option_strings if o.startswith("--")]
            if long and action.dest not in ("help",):
                out.setdefault(action.dest, long[0])
    return out


def _subcommand(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    chosen: argparse.ArgumentParser = sub.choices[command]
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # `perfmodel` alone: the commands, then one line saying so
        parser.print_help()
        print("perfmodel: error: give a command (listed above)", file=sys.stderr)
        return 2
    try:
        with cli_spelling(_options(parser, args.command)):  # messages name --options
            return int(args.func(args) or 0)
    except PerfmodelError as e:
        print(f"perfmodel: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `perfmodel ... | head`
        return 0
    except KeyboardInterrupt:  # what was written is complete: every file is written atomically
        print("perfmodel: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
