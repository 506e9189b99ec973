"""The gateway runs a handler's coroutine without a Task (cluster/gateway/server.py, `_step`), and an
actor its channel calls (cluster/channels/server.py, through cluster/eager.py), so nothing they run
may need one: no `asyncio.current_task()`, nor what calls it (`asyncio.timeout`,
`timeout_at`, and `wait_for`, which is built on `timeout` from Python 3.12), nor context variables a
Task would carry. This holds the rule over the code handlers run: the handlers, the clients they
call and the services' flows. (A bare `yield` is allowed: the server hands such a coroutine to a Task.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PLACES = ("cluster/gateway/handlers", "cluster/clients", "cluster/services",
          # The actors' channel calls run the same way (cluster/channels/server.py, cluster/eager.py).
          "cluster/channels", "cluster/actors", "cluster/runtime", "cluster/replication", "cluster/share",
          "cluster/log", "cluster/metrics")
CHANNEL_FILES = ("cluster/partition.py", "cluster/replicated_partition.py", "cluster/delayed_fetch.py", "cluster/batching.py")
FILES = sorted([p for place in PLACES for p in (ROOT / place).rglob("*.py")] + [ROOT / f for f in CHANNEL_FILES])
FORBIDDEN = {"current_task", "timeout", "timeout_at", "wait_for", "TaskGroup"}


def needs_a_task(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN and isinstance(node.value, ast.Name) \
                and node.value.id == "asyncio":
            found.append(f"line {node.lineno}: asyncio.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "asyncio":
            found += [f"line {node.lineno}: from asyncio import {a.name}" for a in node.names if a.name in FORBIDDEN]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"line {node.lineno}: imports contextvars" for n in names if n.split(".")[0] == "contextvars"]
    return found


def test_the_rule_sees_what_it_forbids(tmp_path):
    sample = tmp_path / "handler.py"
    sample.write_text("import asyncio\nfrom asyncio import wait_for\nasync def h():\n"
                      "    asyncio.current_task()\n    async with asyncio.timeout(1):\n        pass\n")
    assert len(needs_a_task(sample)) == 3


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_a_handler_runs_needs_a_task(path):
    assert not needs_a_task(path), f"{path.relative_to(ROOT)} needs a Task: {needs_a_task(path)}"
