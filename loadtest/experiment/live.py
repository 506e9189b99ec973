"""What an experiment shows while it runs (rich): counters kept from the event stream."""

from __future__ import annotations

import time
from collections import Counter, deque
from typing import Any

from rich.console import Group
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from loadtest.members.errors import TRANSPORT, is_failure
from kio.schema.errors import ErrorCode


class LiveStats:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.responses: Counter[str] = Counter()  # api -> answers
        self.failures: Counter[str] = Counter()  # error name -> count: codes no retry gets past
        self.retriable: Counter[str] = Counter()  # retriable codes and the group protocol's signals
        self.transport: Counter[str] = Counter()  # connections lost, answers that never came
        self.latencies: dict[str, deque[float]] = {}
        self._rates: deque[tuple[float, Counter[str]]] = deque(maxlen=12)
        self.group_states: dict[str, str] = {}
        self.fault_lines: list[str] = []

    def observe(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            kind = row["kind"]
            self.counts[kind] += 1
            if kind == "response":
                api = row["api"]
                self.responses[api] += 1
                self.latencies.setdefault(api, deque(maxlen=2000)).append(row["latency_ms"])
                error = row["error"]
                if error != "NONE":
                    code = getattr(ErrorCode, error.lower(), ErrorCode.unknown_server_error)
                    bucket = self.transport if code in TRANSPORT else self.failures if is_failure(code) else self.retriable
                    bucket[error] += 1
            elif kind == "delivery":
                self.counts[f"delivery:{row['role']}"] += 1
            elif kind == "group_state" and row.get("state"):
                self.group_states[row["group"]] = row["state"]

    def rate(self, key: str) -> float:
        """Per second over the last few seconds (sampled by `sample`)."""
        if len(self._rates) < 2:
            return 0.0
        (t0, c0), (t1, c1) = self._rates[0], self._rates[-1]
        return (c1[key] - c0[key]) / max(t1 - t0, 1e-3)

    def sample(self) -> None:
        self._rates.append((time.monotonic(), Counter(self.counts)))

    def p99(self, api: str) -> float | None:
        values = sorted(self.latencies.get(api, ()))
        return values[int(len(values) * 0.99) - 1] if len(values) >= 10 else None


def render(stats: LiveStats, phase: str, elapsed: float, duration: float, members: dict[str, tuple[int, int]],
           faults_done: int, faults_total: int) -> Group:
    bar = ProgressBar(total=max(duration, 1), completed=min(elapsed, duration), width=50)
    table = Table.grid(padding=(0, 2))
    table.add_column(style="dim")
    table.add_column()
    table.add_row(Text.assemble((f" {phase} ", "bold reverse")), Group(Text(f"{elapsed:.0f} / {duration:.0f} s"), bar))
    members_line = "   ".join(f"{role} {ready}/{total}" for role, (ready, total) in members.items())
    table.add_row("members (stable/all)", members_line)
    table.add_row("records",
                  f"produced {stats.counts['produce']:,} ({stats.rate('produce'):,.0f}/s)   "
                  f"delivered classic {stats.counts['delivery:classic']:,} ({stats.rate('delivery:classic'):,.0f}/s)   "
                  + (f"consumer {stats.counts['delivery:consumer']:,} ({stats.rate('delivery:consumer'):,.0f}/s)   "
                     if stats.counts["delivery:consumer"] else "")
                  + f"share {stats.counts['delivery:share']:,} ({stats.rate('delivery:share'):,.0f}/s)")
    busiest = sorted(stats.responses.items(), key=lambda kv: -kv[1])[:6]
    apis = "   ".join(f"{api} {n:,}" + (f" p99 {p:.0f} ms" if (p := stats.p99(api)) is not None else "")
                       for api, n in busiest)
    table.add_row("requests", f"{stats.rate('response'):,.0f}/s   {apis}")
    failures = ", ".join(f"{k} {v}" for k, v in stats.failures.most_common(3)) or "none"
    table.add_row("errors", f"retriable {sum(stats.retriable.values()):,}   connections lost or timed out "
                            f"{sum(stats.transport.values()):,}   failures: {failures}")
    states = Counter(stats.group_states.values())
    table.add_row("groups (monitor)", "   ".join(f"{s} {n}" for s, n in sorted(states.items())) or "-")
    table.add_row("faults", f"{faults_done}/{faults_total}" + (f"   {stats.fault_lines[-1]}" if stats.fault_lines else ""))
    return table
