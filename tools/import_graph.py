"""perfmodel's module graph, read from the code: who imports whom, cycles, private names.

    python3 tools/import_graph.py                 # summary of this checkout
    python3 tools/import_graph.py --root DIR --png docs/graph.png --dot docs/graph.dot

Every ``import`` and ``from ... import`` inside ``perfmodel/`` counts, wherever it
stands (module level, inside a function, under ``if TYPE_CHECKING``): a deferred or
typing-only import is still a dependency a reader has to follow. ``from pkg import mod``
is an edge to the module ``pkg.mod``. Standard library only for the analysis; the
picture needs matplotlib.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: Layers, bottom up: a module may import its own layer and the layers below it.
#: The first matching prefix wins (most specific first).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("commands", ("perfmodel.cli", "perfmodel.commands")),
    ("report", ("perfmodel.report", "perfmodel.estimate_plot")),
    ("validation", ("perfmodel.validation",)),
    ("analysis", ("perfmodel.analysis", "perfmodel.estimate")),
    (
        "evaluation",
        ("perfmodel.evaluate", "perfmodel.prediction", "perfmodel.results", "perfmodel.parallel"),
    ),
    ("arguments", ("perfmodel.arguments", "perfmodel.launch", "perfmodel.shape")),
    ("catalog", ("perfmodel.catalog",)),
    (
        "model",
        (
            "perfmodel.symbols",
            "perfmodel.costs",
            "perfmodel.compile",
            "perfmodel.roofline",
        ),
    ),
    (
        "foundation",
        (
            "perfmodel.errors",
            "perfmodel.units",
            "perfmodel.atomic",
            "perfmodel.vocabulary",
            "perfmodel.trace",
        ),
    ),
)
ORDER = [name for name, _ in reversed(LAYERS)]


def layer_of(module: str) -> str:
    for name, prefixes in LAYERS:
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return name
    return "other"


@dataclass
class Graph:
    modules: dict[str, Path]
    edges: dict[str, set[str]] = field(default_factory=dict)
    private: list[tuple[str, str, str]] = field(default_factory=list)  #: (importer, module, name)


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, here: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = here.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def build(root: Path, package: str = "perfmodel") -> Graph:
    """The import graph of ``root/package`` (test files and scripts outside it are not read)."""
    files = sorted((root / package).rglob("*.py"))
    graph = Graph({_module_name(root, f): f for f in files})
    for module, path in graph.modules.items():
        targets = graph.edges.setdefault(module, set())
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name in graph.modules)
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(node, module, is_package)
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    if sub in graph.modules:
                        targets.add(sub)
                    elif source in graph.modules:
                        targets.add(source)
                        if alias.name.startswith("_") and not alias.name.startswith("__"):
                            graph.private.append((module, source, alias.name))
        targets.discard(module)
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in sorted(graph.modules):
        if v not in index:
            visit(v)
    return out


def upward(graph: Graph) -> list[tuple[str, str]]:
    """Edges from a lower layer to a higher one (the layering says they must not exist)."""
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(
        (a, b)
        for a, targets in graph.edges.items()
        for b in targets
        if layer_of(a) in rank and layer_of(b) in rank and rank[layer_of(b)] > rank[layer_of(a)]
    )


def _short(module: str) -> str:
    return module.removeprefix("perfmodel.") if module != "perfmodel" else "perfmodel"


def to_dot(graph: Graph) -> str:
    lines = ["digraph perfmodel {", "  rankdir=BT; node [shape=box, fontsize=10];"]
    by_layer: dict[str, list[str]] = {}
    for m in graph.modules:
        by_layer.setdefault(layer_of(m), []).append(m)
    for layer, mods in sorted(by_layer.items()):
        lines.append(f'  subgraph "cluster_{layer}" {{ label="{layer}";')
        lines.extend(f'    "{_short(m)}";' for m in sorted(mods))
        lines.append("  }")
    for a in sorted(graph.edges):
        lines.extend(f'  "{_short(a)}" -> "{_short(b)}";' for b in sorted(graph.edges[a]))
    lines.append("}")
    return "\n".join(lines) + "\n"


def draw(graph: Graph, path: Path, title: str) -> None:
    """Layers as rows (foundation at the bottom), modules along each row, imports as arrows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bad = {(a, b) for c in cycles(graph) for a in c for b in graph.edges[a] if b in c}
    private = {(a, b) for a, b, _ in graph.private}
    rows: dict[str, list[str]] = {}
    for m in sorted(graph.modules):
        if m == "perfmodel" or m.endswith("__main__"):
            continue
        rows.setdefault(layer_of(m), []).append(m)
    names = [n for n in [*ORDER, "other"] if n in rows]
    pos = {}
    width = max(len(v) for v in rows.values())
    for y, layer in enumerate(names):
        mods = rows[layer]
        for x, m in enumerate(mods):
            pos[m] = ((x + 0.5) * width / len(mods), y * 1.6 + (x % 2) * 0.45)
    fig, ax = plt.subplots(figsize=(max(12, width * 1.25), 2.0 + 1.45 * len(names)))
    for a, targets in graph.edges.items():
        for b in targets:
            if a in pos and b in pos:
                red = (a, b) in bad
                color = "red" if red else "darkorange" if (a, b) in private else "0.6"
                ax.annotate(
                    "",
                    xy=pos[b],
                    xytext=pos[a],
                    arrowprops=dict(
                        arrowstyle="->",
                        color=color,
                        lw=0.5 if color == "0.6" else 1.4,
                        shrinkA=9,
                        shrinkB=9,
                    ),
                )
    for m, (x, y) in pos.items():
        ax.text(
            x,
            y,
            _short(m),
            ha="center",
            va="center",
            fontsize=7,
            bbox=dict(boxstyle="round,pad=0.25", fc="white", ec="0.3", lw=0.6),
        )
    for y, layer in enumerate(names):
        label = "no layer (flat)" if layer == "other" else layer
        ax.text(-0.3, y * 1.6 + 0.2, label, ha="right", va="center", fontsize=9, weight="bold")
    ax.set_xlim(-2.2, width + 0.2)
    ax.set_ylim(-0.8, len(names) * 1.6)
    ax.axis("off")
    n_edges = sum(len(t) for t in graph.edges.values())
    ax.set_title(
        f"{title}: {len(pos)} modules, {n_edges} imports "
        "(red: in a cycle; orange: takes a private name)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    p.add_argument("--png", type=Path)
    p.add_argument("--dot", type=Path)
    p.add_argument("--title", default="perfmodel")
    args = p.parse_args(argv)
    graph = build(args.root)
    n_edges = sum(len(t) for t in graph.edges.values())
    print(f"{len(graph.modules)} modules, {n_edges} imports")
    for c in cycles(graph):
        print("cycle:", " <-> ".join(c))
    for a, m, name in graph.private:
        print(f"private: {a} imports {m}.{name}")
    for a, b in upward(graph):
        print(f"upward: {a} ({layer_of(a)}) -> {b} ({layer_of(b)})")
    if args.dot:
        args.dot.write_text(to_dot(graph))
    if args.png:
        draw(graph, args.png, args.title)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
