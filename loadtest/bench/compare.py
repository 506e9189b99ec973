"""Runs of one workload against raygroups and its peers, alternating, best of N, and their table.

A figure is a key of the dict a workload returns, with a label and whether higher is better; each
system's value is its best over the rounds. Rounds alternate the order (peers first, then raygroups
first) so that neither side always runs on a machine warmed, or loaded, by the other.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ContextManager

from rich.table import Table

from loadtest.bench.systems import console


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    higher_is_better: bool = True
    unit: str = ""


Workload = Callable[[str, str], dict[str, float]]  # (system name, bootstrap) -> figures


def best_of(systems: dict[str, Callable[[], ContextManager[str]]], workload: Workload, figures: list[Figure],
            rounds: int) -> dict[str, dict[str, float]]:
    names = list(systems)
    best: dict[str, dict[str, float]] = {}
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            mine = best.setdefault(name, {f.key: math.nan for f in figures})
            try:
                with systems[name]() as bootstrap:
                    with console.status(f"{name}, run {r + 1} of {rounds}…"):
                        got = workload(name, bootstrap)
            except Exception as e:  # noqa: BLE001 - a peer that cannot serve a figure fails its run, not the others
                console.print(f"  [red]{name}, run {r + 1} failed:[/] {type(e).__name__}: {e}")
                continue
            console.print(f"  {name}, run {r + 1}: " + ", ".join(f"{f.key}={got[f.key]:,.1f}" for f in figures))
            for f in figures:
                better = max if f.higher_is_better else min
                mine[f.key] = got[f.key] if math.isnan(mine[f.key]) else better(mine[f.key], got[f.key])
    return best


def _num(x: float, unit: str) -> str:
    if math.isnan(x):
        return "failed"
    digits = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2
    return f"{x:,.{digits}f}{unit}"


def ratio(ours: float, peer: float) -> float:
    """raygroups/peer; whether above 1 is good is the figure's higher_is_better (a rate, or a time)."""
    return ours / peer if peer else math.inf


def table(title: str, results: dict[str, dict[str, float]], figures: list[Figure]) -> Table:
    peers = [n for n in results if n != "raygroups"]
    t = Table(title=title)
    t.add_column("figure")
    t.add_column("raygroups", justify="right")
    for p in peers:
        t.add_column(p, justify="right")
        t.add_column(f"vs {p}", justify="right")
    t.add_column("raygroups/peer: better is")
    for f in figures:
        row = [f.label, _num(results["raygroups"][f.key], f.unit)]
        for p in peers:
            r = ratio(results["raygroups"][f.key], results[p][f.key])
            row += [_num(results[p][f.key], f.unit), "—" if math.isnan(r) else f"{r:.2f}×"]
        row.append("higher" if f.higher_is_better else "lower")
        t.add_row(*row)
    return t


def _plain(x: object) -> object:
    """NaN (a run that failed) and infinity become null: JSON has neither."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def report(title: str, results: dict[str, dict[str, float]], figures: list[Figure], json_out: Path | None,
           **extra: object) -> None:
    console.print(table(title, results, figures))
    if json_out:
        ratios = {p: {f.key: ratio(results["raygroups"][f.key], v[f.key]) for f in figures}
                  for p, v in results.items() if p != "raygroups"}
        json_out.write_text(json.dumps(_plain({"title": title, "results": results, "ratios": ratios,
                                               "higher_is_better": {f.key: f.higher_is_better for f in figures},
                                               **extra}), indent=2))
