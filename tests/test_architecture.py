"""The layering holds: no import cycle, no private name across modules, no upward import.

The graph is read from the source by ``tools/import_graph.py`` (ast, every import counted:
module level, in functions, under TYPE_CHECKING).
"""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "tools/import_graph.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def graph_tool():
    tool = _tool()
    return tool, tool.build(ROOT)


def test_no_import_cycle(graph_tool):
    tool, graph = graph_tool
    assert tool.cycles(graph) == []


def test_no_private_name_imported_from_another_module(graph_tool):
    _, graph = graph_tool
    assert graph.private == []


def test_no_layer_imports_a_layer_above_it(graph_tool):
    tool, graph = graph_tool
    assert tool.upward(graph) == []


def test_every_module_has_a_layer(graph_tool):
    tool, graph = graph_tool
    unplaced = [m for m in graph.modules if tool.layer_of(m) == "other" and m != "perfmodel"]
    assert unplaced == []


def test_the_checker_sees_a_cycle_and_a_private_import(tmp_path):
    tool = _tool()
    pkg = tmp_path / "perfmodel"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "roofline.py").write_text("from perfmodel.evaluate import _rates\n")
    (pkg / "evaluate.py").write_text("def f():\n    from perfmodel import roofline\n")
    graph = tool.build(tmp_path)
    assert tool.cycles(graph) == [["perfmodel.evaluate", "perfmodel.roofline"]]
    assert graph.private == [("perfmodel.roofline", "perfmodel.evaluate", "_rates")]
    assert tool.upward(graph) == [("perfmodel.roofline", "perfmodel.evaluate")]


#: Each formula or launch rule, by a pattern of its definition, and the one module that
#: owns it. A second definition anywhere under perfmodel/ fails: import it instead.
OWNERS = {
    r"^\s*def (footprint|capacity|check_fits|gqa_pack|kv_splits|split_rule)\b": "launch.py",
    r"^\s*def (default_tiles|floor_launches|split_limit|tile_gcd|programs|resolve)\b": "launch.py",
    r"^\s*def (_pack_one|_capacity_one|_block_of_one|_spread|wave_efficiency_splits)\b": "",
    r"\bsplit_sm_factor\s*\*|\*\s*\w+\.split_sm_factor\b": "launch.py",
    r"REGISTER_BYTES \* \w*spilled|2 \* 4 \* \w*spilled": "launch.py",
    r"^TABLE_ENTRY_BYTES\s*=": "costs/flash.py",
    r"^KV_STAGES\s*=": "costs/flash.py",
    r"kv_stages \* 2 \* block_k": "costs/flash.py",
    r"^\s*def (busy_fraction|wave_efficiency|matmul_rate_at_floor|lower_bound)\b": "roofline.py",
    r"\bis_scalar\(": "",
}


def test_no_formula_or_launch_rule_is_defined_twice():
    import re

    root = ROOT / "perfmodel"
    found = {pattern: [] for pattern in OWNERS}
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        for pattern in OWNERS:
            if re.search(pattern, text, flags=re.M):
                found[pattern].append(str(path.relative_to(root)))
    wrong = {p: files for p, files in found.items() if files != ([OWNERS[p]] if OWNERS[p] else [])}
    assert wrong == {}


# --- the kernel packages: pallas_kernels (what runs on the GPU) and kernel_bench (harness)
KERNEL_PACKAGES = ("pallas_kernels", "kernel_bench")
#: Issue 21's ceilings driver, which that issue names ``python -m pallas_kernels.ceilings``:
#: a microbenchmark script, not an attention kernel; it times with ``kernel_bench.timing``
#: (``_timing`` re-exports it for that script's fallback import; delete both together).
TRANSITIONAL = {"pallas_kernels.ceilings", "pallas_kernels._timing"}


@pytest.mark.parametrize("package", KERNEL_PACKAGES)
def test_no_import_cycle_in_the_kernel_packages(package):
    tool = _tool()
    assert tool.cycles(tool.build(ROOT, package)) == []


@pytest.mark.parametrize("package", KERNEL_PACKAGES)
def test_no_private_name_across_kernel_modules(package):
    tool = _tool()
    assert tool.build(ROOT, package).private == []


def _top_level_imports(path: Path) -> set[str]:
    import ast

    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_kernels_import_neither_perfmodel_nor_the_harness():
    """Only the harness (kernel_bench) imports perfmodel; the kernels stand alone."""
    offenders = {}
    for path in sorted((ROOT / "pallas_kernels").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if module in TRANSITIONAL:
            continue
        upward = _top_level_imports(path) & {"perfmodel", "kernel_bench"}
        if upward:
            offenders[module] = sorted(upward)
    assert offenders == {}


def test_perfmodel_imports_no_kernel_package():
    offenders = {}
    for path in sorted((ROOT / "perfmodel").rglob("*.py")):
        found = _top_level_imports(path) & set(KERNEL_PACKAGES)
        if found:
            offenders[str(path.relative_to(ROOT))] = sorted(found)
    assert offenders == {}
