"""``perfmodel explore``: the interactive roofline page (one offline HTML file)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explore", help="write an interactive roofline page (one self-contained HTML file)"
    )
    p.add_argument("--out", default="perfmodel-explore.html", help="the HTML file to write")
    p.add_argument(
        "--measurements",
        nargs="+",
        action="extend",
        default=[],
        metavar="FILE",
        help="measured points (perfmodel.validation.measured JSON) to overlay",
    )
    p.add_argument(
        "--serve", action="store_true", help="also serve it on localhost and open a browser"
    )
    p.add_argument("--port", type=int, default=8765, help="port for --serve")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from perfmodel.arguments import output_file
    from perfmodel.errors import PerfmodelError
    from perfmodel.report.explore import write_page

    out = output_file(args.out, "--out")
    for m in args.measurements:
        if not Path(m).is_file():
            raise PerfmodelError(f"--measurements {m!r}: no such file")
    path = write_page(out, args.measurements)
    print(f"wrote {path}")
    if args.serve:
        _serve(path, args.port)
    return 0


def _serve(path, port: int) -> None:
    """Serve the page's folder on localhost until Ctrl-C (the page itself needs no server)."""
    import functools
    import http.server
    import webbrowser

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(path.parent))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        url = f"http://127.0.0.1:{port}/{path.name}"
        print(f"serving {url} (Ctrl-C to stop)")
        webbrowser.open(url)
        httpd.serve_forever()
