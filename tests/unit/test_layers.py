"""ARCHITECTURE.md's layers: imports point downwards only, not even through type hints.

    loadtest/ -> cluster/ -> sharestate/ -> coordinator/ -> kernel/
kernel/ is Kafka's coordinator-common (clock, timer, codec, result, lifecycle); the share state
machines use it without the group coordinator's domain. The CLI finds the load-test commands
through an entry point, so cluster/ never imports loadtest/.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("kernel", "coordinator", "sharestate", "cluster", "loadtest")  # bottom to top
# Who may import whom: the one table of the contract (a package may always import itself).
ALLOWED = {
    "kernel": {"kernel"},
    "coordinator": {"kernel", "coordinator"},
    "sharestate": {"kernel", "coordinator", "sharestate"},
    "cluster": {"kernel", "coordinator", "sharestate", "cluster"},
    "loadtest": {"kernel", "coordinator", "sharestate", "cluster", "loadtest"},
}
FILES = sorted(p for d in LAYERS for p in (ROOT / d).rglob("*.py"))


def top_level_imports(path: Path) -> set[str]:
    """Every top-level package the file imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def imported_packages(path: Path) -> set[str]:
    return top_level_imports(path) & set(LAYERS)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_downwards_only(path):
    layer = path.relative_to(ROOT).parts[0]
    upward = imported_packages(path) - ALLOWED[layer]
    assert not upward, f"{path.relative_to(ROOT)} ({layer}) imports {sorted(upward)}, a layer above it"


def test_every_layer_has_code():
    assert {p.relative_to(ROOT).parts[0] for p in FILES} == set(LAYERS)


# -- inside cluster/: the same rule between its parts (ARCHITECTURE.md, "cluster/") --------------
#
# Bottom to top. `base` is everything the parts stand on (config, metadata, the log, the runtime,
# the partition and share hosts, metrics); `calls` the typed contract between gateways and actors;
# `clients` every caller of an actor; `services` Kafka's GroupCoordinatorService flows; `gateway`
# the Kafka wire protocol; `actors` the thin Ray shells; `control` the controller, reconciler and
# what they spawn and place; `commands` what a user runs (the CLI, the launcher, the operator API
# client). A module may import its own part and the parts below it.
CLUSTER_PARTS = ("base", "calls", "clients", "services", "gateway", "actors", "control", "commands")
COMMANDS = {"cli", "launcher", "admin_client", "user_commands", "cli_tables", "cli_output"}
CLUSTER_FILES = sorted((ROOT / "cluster").rglob("*.py"))


def cluster_part(module: str) -> str:
    """The part of a dotted cluster module name (cluster.x.y)."""
    parts = module.split(".")
    if len(parts) < 2:
        return "base"
    if parts[1] in CLUSTER_PARTS:
        return parts[1]
    return "commands" if parts[1] in COMMANDS else "base"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def cluster_imports(path: Path) -> set[str]:
    """Every cluster module this file imports, at the top or inside a function (a lazy import is
    still an arrow: it only moves the circle from import time to call time)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "cluster"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.split(".")[0] == "cluster":
            out |= {imported_module(node.module, a.name) for a in node.names}
    return out


def imported_module(module: str, name: str) -> str:
    """What `from module import name` imports: the submodule `name` if there is one, else `module`."""
    sub = f"{module}.{name}"
    path = ROOT / sub.replace(".", "/")
    return sub if path.with_suffix(".py").exists() or (path / "__init__.py").exists() else module


@pytest.mark.parametrize("path", CLUSTER_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_cluster_parts_point_downwards_only(path):
    mine = CLUSTER_PARTS.index(cluster_part(module_name(path)))
    upward = sorted(m for m in cluster_imports(path) if CLUSTER_PARTS.index(cluster_part(m)) > mine)
    assert not upward, f"{path.relative_to(ROOT)} ({cluster_part(module_name(path))}) imports {upward}, a part above it"


def test_no_import_circles():
    """No module reaches itself through imports, in any layer (lazy imports included)."""
    graph: dict[str, set[str]] = {}
    for path in FILES:
        name = module_name(path)
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                graph[name] |= {imported_module(node.module, a.name) for a in node.names}
    for name in graph:
        graph[name] = {m for m in graph[name] if m in graph and m != name}
    seen: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        seen[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if seen.get(nxt) == 1:
                circles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in seen:
                visit(nxt)
        stack.pop()
        seen[node] = 2

    for node in sorted(graph):
        if node not in seen:
            visit(node)
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)
