"""Packaging follows the layers: the cluster's own packages import nothing of the users' extras
(PySpark, matplotlib, locust, pyarrow, confluent-kafka), and a command whose extra is missing says
which to install instead of failing on an import."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import typer

from loadtest import commands
from tests.unit.test_layers import top_level_imports

ROOT = Path(__file__).resolve().parents[2]
SERVER = ("kernel", "coordinator", "sharestate", "cluster")
EXTRA_MODULES = {"pyspark", "matplotlib", "locust", "pyarrow", "confluent_kafka", "gevent", "kafka", "pytest"}


@pytest.mark.parametrize("path", sorted(p for d in SERVER for p in (ROOT / d).rglob("*.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_server_imports_no_extra(path):
    imported = top_level_imports(path)
    assert not imported & EXTRA_MODULES, f"{path.relative_to(ROOT)} imports {sorted(imported & EXTRA_MODULES)}"


def test_a_command_without_its_extra_says_which_to_install(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else real(name, *a))
    with pytest.raises(typer.Exit) as exit_:
        commands.require("demo", "demo")
    assert exit_.value.exit_code == 2
    assert "pip install 'raygroups[demo]'" in capsys.readouterr().err.replace("\n", "")
    commands.require("check", "loadtest")  # pyarrow and locust are here: no refusal
