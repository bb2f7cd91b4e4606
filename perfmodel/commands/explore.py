"""``perfmodel explore``: the interactive roofline page (one offline HTML file)."""

from __future__ import annotations

import argparse
import contextlib
import http.server
from pathlib import Path
from typing import Any

#: The address and port ``--serve`` listens on unless ``--host``/``--port`` name others.
LOOPBACK = "127.0.0.1"
PORT = 8765


def _words(values: Any) -> str:
    return " ".join(":".join(map(str, v)) if isinstance(v, tuple) else str(v) for v in values)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from perfmodel.report.explore_grid import Grid

    grid = Grid()
    p = sub.add_parser(
        "explore",
        help="write an interactive roofline page (one self-contained HTML file)",
        description=(
            "Write one offline HTML page showing the model's numbers on a grid of settings: "
            "perfmodel.sweep() computes every table when the page is built (the grid's "
            "product sets the page's size, printed at the end)."
        ),
    )
    p.add_argument(
        "--out",
        default="perfmodel-explore.html",
        help="the HTML file to write (default: %(default)s)",
    )
    p.add_argument(
        "--measurements",
        nargs="+",
        action="extend",
        default=[],
        metavar="FILE",
        help="measured points (perfmodel.validation.measured JSON) to overlay",
    )
    p.add_argument("--hw", nargs="+", metavar="DEVICE", help="devices (default: every one)")
    p.add_argument("--dtype", nargs="+", help=f"dtypes (default: {_words(grid.dtypes)})")
    p.add_argument("--d", nargs="+", type=int, help=f"head dims (default: {_words(grid.d)})")
    p.add_argument(
        "--heads",
        nargs="+",
        metavar="H[:H_KV]",
        help=f"query and K/V heads (default: {_words(grid.heads)})",
    )
    p.add_argument("--batch", nargs="+", type=int, help=f"batches (default: {_words(grid.batch)})")
    p.add_argument(
        "--windows",
        nargs="+",
        metavar="W",
        help="the window control's sliding windows, keys before the query; 'none' (no "
        f"window) is always offered (default: {_words(grid.windows[1:])})",
    )
    p.add_argument(
        "--documents",
        nargs="+",
        metavar="L",
        help="the mask picker's packed documents of L tokens; 'none' is always offered "
        f"(default: {_words(grid.documents[1:])})",
    )
    p.add_argument(
        "--prefix-lm",
        nargs="+",
        metavar="P",
        help="the block-mask picker's prefix LM (attention-gym's: a bidirectional prefix of "
        "P tokens, causal after it); 'none' is always offered "
        f"(default: {_words(grid.prefixes[1:])})",
    )
    p.add_argument(
        "--steps-per-octave",
        type=int,
        help=f"n grid points per octave, n from 1 to 2**{grid.n_max_log2} "
        f"(default: {grid.steps_per_octave})",
    )
    p.add_argument(
        "--serve",
        action="store_true",
        help="also serve the page (and nothing else) over HTTP and open a browser",
    )
    p.add_argument(
        "--host",
        default=LOOPBACK,
        help="address --serve listens on (default: %(default)s, this machine only)",
    )
    p.add_argument(
        "--port", type=int, default=PORT, help="port for --serve (default: %(default)s; 0: any)"
    )
    p.set_defaults(func=run)


def _heads(values: list[str]) -> tuple[tuple[int, int], ...]:
    from perfmodel.errors import PerfmodelError

    out = []
    for v in values:
        parts = v.split(":")
        try:
            h, h_kv = (int(parts[0]), int(parts[-1])) if len(parts) <= 2 else (0, 0)
        except ValueError:
            h = h_kv = 0
        if h < 1 or h_kv < 1 or h % h_kv:
            raise PerfmodelError(
                f"--heads {v!r} must be H or H:H_KV with positive integers, H_KV dividing H"
            )
        out.append((h, h_kv))
    return tuple(out)


def _masks(flag: str, values: list[str]) -> tuple[int | None, ...]:
    """A mask control's values: None (no mask) first, then the positive integers given."""
    from perfmodel.errors import PerfmodelError

    out: list[int | None] = [None]
    for v in values:
        if v.lower() == "none":
            continue
        if not v.isdigit() or int(v) < 1:
            raise PerfmodelError(f"{flag} {v!r} must be positive integers (or none)")
        out.append(int(v))
    return tuple(dict.fromkeys(out))


def _check_address(args: argparse.Namespace) -> None:
    """--host and --port belong to --serve; with it, the host must resolve (checked before
    the page is built, not when the server binds)."""
    import socket

    from perfmodel.arguments import fail

    if not args.serve:
        for name, value, default in (("--host", args.host, LOOPBACK), ("--port", args.port, PORT)):
            if value != default:
                raise fail(name, value, "is where --serve listens: give --serve too")
        return
    try:
        socket.getaddrinfo(args.host, args.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise fail("--host", args.host, f"is not an address here: {e}") from None


def run(args: argparse.Namespace) -> int:
    from perfmodel.arguments import output_file
    from perfmodel.errors import PerfmodelError, cli_spelling
    from perfmodel.report.explore import size_of, summary, write_page
    from perfmodel.report.explore_grid import Grid

    out = output_file(args.out, "--out")
    for m in args.measurements:
        if not Path(m).is_file():
            raise PerfmodelError(f"--measurements {m!r}: no such file")
    if not 0 <= args.port <= 65535:
        raise PerfmodelError(f"--port={args.port} must be in 0..65535")
    _check_address(args)
    given = dict(
        hw=args.hw,
        dtypes=args.dtype,
        d=args.d,
        heads=None if args.heads is None else _heads(args.heads),
        batch=args.batch,
        windows=None if args.windows is None else _masks("--windows", args.windows),
        documents=None if args.documents is None else _masks("--documents", args.documents),
        prefixes=None if args.prefix_lm is None else _masks("--prefix-lm", args.prefix_lm),
        steps_per_octave=args.steps_per_octave,
    )
    options: dict[str, Any] = {
        k: v if k == "steps_per_octave" else tuple(v) for k, v in given.items() if v is not None
    }
    grid = Grid(**options).check()
    with cli_spelling({}):  # the page's messages are predict()'s: its controls are no options
        path, data = write_page(out, args.measurements, grid)
    print(f"wrote {path} ({size_of(path)}: {summary(data)})")
    if args.serve:
        serve(path, args.host, args.port)
    return 0


class PageHandler(http.server.BaseHTTPRequestHandler):
    """Answers GET and HEAD for the page's own path (and ``/``) with the page, read once
    at start; every other path, method or query is refused. Nothing else on disk is
    reachable: no path from a request is ever joined to a folder."""

    page: bytes = b""
    name: str = ""

    def _answer(self, body: bool) -> None:
        path = self.path.split("?", 1)[0]
        if path not in ("/", f"/{self.name}") or "?" in self.path:
            self.send_error(404, "only the explorer's page is served here")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.page)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if body:
            self.wfile.write(self.page)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._answer(body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(body=False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # quiet: the command printed where it listens


def page_server(path: Path, host: str = LOOPBACK, port: int = 0) -> http.server.HTTPServer:
    """An HTTP server for the page at ``path`` and nothing else (not yet serving)."""
    from perfmodel.errors import PerfmodelError

    handler = type(
        "Handler", (PageHandler,), {"page": Path(path).read_bytes(), "name": Path(path).name}
    )
    try:
        return http.server.ThreadingHTTPServer((host, port), handler)
    except OSError as e:
        raise PerfmodelError(f"--host={host!r} --port={port}: cannot listen ({e.strerror})") from e


def serve(path: Path, host: str, port: int) -> None:
    """Serve the page until Ctrl-C, saying where; open it in a browser."""
    import webbrowser

    with page_server(path, host, port) as httpd:
        bound_host, bound_port = httpd.server_address[:2]
        url = f"http://{bound_host!s}:{bound_port}/{path.name}"
        print(f"serving {url} (this page only; Ctrl-C to stop)", flush=True)
        webbrowser.open(url)
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: stop serving, exit 0
            httpd.serve_forever()
