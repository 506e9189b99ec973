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


def imported_packages(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out & set(LAYERS)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_downwards_only(path):
    layer = path.relative_to(ROOT).parts[0]
    upward = imported_packages(path) - ALLOWED[layer]
    assert not upward, f"{path.relative_to(ROOT)} ({layer}) imports {sorted(upward)}, a layer above it"


def test_every_layer_has_code():
    assert {p.relative_to(ROOT).parts[0] for p in FILES} == set(LAYERS)
