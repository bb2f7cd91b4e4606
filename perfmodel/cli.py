"""The ``perfmodel`` command line: a thin dispatcher over ``perfmodel.commands.*``.

Each subcommand is one module with ``register(subparsers)``; it sets ``func`` on its
parser. Bad input prints one line on stderr and exits 2, never a traceback; Ctrl-C prints
one line and exits 130. Arguments are checked by ``perfmodel.arguments`` (the API's own
checks), and output folders before any long work.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from perfmodel.errors import PerfmodelError

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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, no usage dump
        self.exit(2, f"perfmodel: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from perfmodel import __version__

    parser = _Parser(prog="perfmodel", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"perfmodel {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"perfmodel.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
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
