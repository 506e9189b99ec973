"""The domain (kernel/, coordinator/, sharestate/, and cluster/replication's state machines) stays
deterministic: no clocks, randomness, I/O or Ray."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"time", "asyncio", "random", "socket", "ray", "uvloop", "threading", "os", "datetime", "secrets"}
# cluster/replication/log_replica.py joins the replication state machines to a PartitionLog (file
# I/O), manager.py runs them in asyncio, host.py is an actor's share of that, and
# coordinator_writer.py the coordinator runtime's writer on it: the modules of that package
# outside the domain.
HOSTS = {ROOT / f"cluster/replication/{name}.py" for name in ("log_replica", "manager", "host", "coordinator_writer")}
FILES = sorted(
    p for d in ("kernel", "coordinator", "sharestate", "cluster/replication") for p in (ROOT / d).rglob("*.py")
    if p not in HOSTS
)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_domain_module_imports_nothing_impure(path):
    tree = ast.parse(path.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN, f"{path.name} imports {sorted(imported & FORBIDDEN)}"
    cluster = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("cluster")}
    outside = {m for m in cluster if not m.startswith("cluster.replication")}
    assert not outside, f"the domain must not import the cluster layer: {sorted(outside)}"


def test_there_is_a_domain_to_check():
    assert len(FILES) >= 5
