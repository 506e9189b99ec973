"""The kcat workload (loadtest/bench/kcat.py): a missing kcat is said in one line and ends the
command; a run counts the lines kcat prints and reads its CPU and the server's."""

from __future__ import annotations

import os
import sys

from typer.testing import CliRunner

from loadtest.bench import kcat
from loadtest.bench.app import app


def test_a_missing_kcat_is_said_in_one_line_and_nothing_runs(monkeypatch):
    monkeypatch.setattr(kcat, "available", lambda: None)
    started = []
    monkeypatch.setattr("loadtest.bench.commands_classic.best_of", lambda *a, **k: started.append(a))
    result = CliRunner().invoke(app, ["produce-fetch", "--client", "kcat"])
    assert result.exit_code == 2
    assert "kcat (librdkafka's C client) is not installed" in result.output
    assert started == []


def test_an_unknown_client_is_refused():
    result = CliRunner().invoke(app, ["produce-fetch", "--client", "librdkafka"])
    assert result.exit_code == 2 and "confluent, kcat or light" in result.output


def test_run_counts_the_printed_lines_and_the_cpu_of_both_sides():
    # A real child process in kcat's place: it prints 3 lines after burning some CPU.
    script = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.05: pass\nprint('a\\nb\\nc')"
    me = os.getpid()
    got = kcat._run([sys.executable, "-c", script], dict(os.environ), None, {me})
    assert got["lines"] == 3
    assert got["client_cpu"] >= 0.04  # the child's own CPU, from wait4
    assert got["server_cpu"] >= 0 and got["wall"] > 0


def test_a_failing_run_raises_with_what_it_said():
    try:
        kcat._run([sys.executable, "-c", "import sys; sys.stderr.write('% ERROR: brokers down'); sys.exit(1)"],
                  dict(os.environ), None, set())
    except RuntimeError as exc:
        assert "exited 1" in str(exc) and "brokers down" in str(exc)
    else:
        raise AssertionError("a failed kcat must not give a rate")
