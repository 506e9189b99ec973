"""The benchmark harness: alternating best-of-N runs, ratios, failed runs, and the tansu peer's lookup."""

from __future__ import annotations

import contextlib
import importlib.util
import math

import pytest

from loadtest.bench.compare import Figure, best_of, ratio, table
from loadtest.bench.systems import peers
from loadtest.peers import tansu


def _system(name: str, log: list[str]):
    @contextlib.contextmanager
    def start():
        log.append(name)
        yield f"{name}:9092"
    return start


def test_rounds_alternate_the_order_and_keep_the_best_per_direction():
    order: list[str] = []
    values = iter([10.0, 5.0, 30.0, 1.0])  # peer, raygroups, then raygroups, peer
    figures = [Figure("rps", "r/s"), Figure("ms", "ms", higher_is_better=False)]

    def workload(_name, _bootstrap):
        v = next(values)
        return {"rps": v, "ms": v}

    best = best_of({"tansu": _system("tansu", order), "raygroups": _system("raygroups", order)}, workload, figures, 2)
    assert order == ["tansu", "raygroups", "raygroups", "tansu"]
    assert best["raygroups"] == {"rps": 30.0, "ms": 5.0}
    assert best["tansu"] == {"rps": 10.0, "ms": 1.0}


def test_a_failed_run_leaves_the_other_runs_and_systems_standing():
    runs = iter([RuntimeError("no groups here"), 7.0, 8.0, 9.0])

    def workload(_name, _bootstrap):
        v = next(runs)
        if isinstance(v, Exception):
            raise v
        return {"x": v}

    best = best_of({"tansu": _system("tansu", []), "raygroups": _system("raygroups", [])}, workload,
                   [Figure("x", "x")], 2)
    assert best == {"tansu": {"x": 9.0}, "raygroups": {"x": 8.0}}
    never = best_of({"tansu": _system("tansu", []), "raygroups": _system("raygroups", [])},
                    lambda n, b: (_ for _ in ()).throw(RuntimeError()) if n == "tansu" else {"x": 1.0},
                    [Figure("x", "x")], 1)
    assert math.isnan(never["tansu"]["x"])
    table("t", never, [Figure("x", "x")])  # renders "failed", does not raise


def test_ratio_is_raygroups_over_the_peer_whichever_way_is_better():
    assert ratio(861_000, 1_188_000) == pytest.approx(0.7247, abs=1e-3)
    assert ratio(2.0, 4.0) == 0.5  # a time: below 1 is raygroups ahead
    assert ratio(1.0, 0.0) == math.inf


def test_peer_option():
    assert peers("responder") == ["responder"]
    assert peers("mock") == ["mock"]
    with pytest.raises(SystemExit):
        peers("kafka")


def test_tansu_missing_extra_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(tansu.TansuNotInstalled, match=r"\.\[bench\]"):
        tansu.binary()
