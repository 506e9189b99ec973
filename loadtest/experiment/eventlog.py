"""The experiment's event log: one row per client-observed event, written as Parquet parts.

The schema and the meaning of every kind are in docs/experiments.md. Rows arrive as dicts (from
the members' observations, the monitor and the fault injector) and are buffered; every
`flush_rows` rows, or when `flush()` is called, they become one closed Parquet file
`events/part-NNNNN.parquet`. A run that dies mid-way therefore keeps every part written before,
and the folder reads as one dataset (pyarrow.dataset, Spark).
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

TIME = pa.timestamp("us", tz="UTC")

SCHEMA = pa.schema(
    [
        ("time", TIME),
        ("kind", pa.string()),
        ("role", pa.string()),
        ("member", pa.string()),
        ("member_id", pa.string()),
        ("group", pa.string()),
        ("api", pa.string()),
        ("broker", pa.string()),
        ("correlation", pa.int64()),
        ("request_time", TIME),
        ("latency_ms", pa.float64()),
        ("error", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("generation", pa.int32()),
        ("delivery_count", pa.int16()),
        ("ack_type", pa.string()),
        ("state", pa.string()),
        ("fault_id", pa.int32()),
        ("target", pa.string()),
        ("key", pa.string()),
        ("detail", pa.string()),
        ("bytes", pa.int64()),
        ("leader_epoch", pa.int32()),
    ]
)
COLUMNS = tuple(SCHEMA.names)
_TIME_COLUMNS = ("time", "request_time")

KINDS = frozenset(
    {
        "request", "response", "delivery", "ack", "commit", "position", "rebalance_start",
        "rebalance_end", "assignment", "fenced", "produce", "produce_failed", "member_start",
        "member_stop", "group_state", "fault", "fault_end", "recovery", "end_offset", "drained",
        "phase",
    }
)


def to_us(ms: float) -> int:
    """Milliseconds (the members' clock) as the log's microseconds."""
    return int(ms * 1000)


class EventLog:
    """Buffered, thread-safe Parquet writer of event rows (dicts keyed by column name).

    `time` and `request_time` are given in milliseconds since the epoch (float), as the members'
    clock runs; `detail` may be a dict (stored as JSON text).
    """

    def __init__(self, run_dir: Path, flush_rows: int = 50_000, background: bool = False) -> None:
        self.directory = Path(run_dir) / "events"
        self.directory.mkdir(parents=True, exist_ok=True)
        self.flush_rows = flush_rows
        self._rows: list[dict[str, Any]] = []
        self._parts = len(list(self.directory.glob("part-*.parquet")))
        self._lock = threading.Lock()
        # Encoding and compressing a part takes tens of milliseconds: an event loop driving
        # members hands it to one thread (one, so parts keep their order) and goes on.
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="eventlog") if background else None
        self._pending: list[Future] = []
        self.rows_written = 0
        self.rows_seen = 0
        self.closed = False

    def emit(self, row: dict[str, Any]) -> None:
        self._rows.append(row)
        self.rows_seen += 1
        if len(self._rows) >= self.flush_rows:
            self.flush()

    def extend(self, rows: list[dict[str, Any]]) -> None:
        self._rows.extend(rows)
        self.rows_seen += len(rows)
        if len(self._rows) >= self.flush_rows:
            self.flush()

    def flush(self) -> None:
        """Write what is buffered as the next part (in the background when so built)."""
        rows, self._rows = self._rows, []
        if not rows:
            return
        path = self.directory / f"part-{self._parts:05d}.parquet"
        self._parts += 1
        if self._writer is None:
            self._write(rows, path)
        else:
            self._pending = [f for f in self._pending if not f.done()]
            self._pending.append(self._writer.submit(self._write, rows, path))

    def _write(self, rows: list[dict[str, Any]], path: Path) -> None:
        table = rows_to_table(rows)
        # Written under a hidden name first (pyarrow and Spark skip names starting with "."), then
        # renamed: a reader of the folder never sees half a part.
        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(table, tmp, compression="zstd")
        tmp.rename(path)
        with self._lock:
            self.rows_written += table.num_rows

    def close(self) -> None:
        if not self.closed:
            self.flush()
            for future in self._pending:
                future.result()
            if self._writer is not None:
                self._writer.shutdown(wait=True)
            self.closed = True


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    columns: dict[str, list[Any]] = {name: [] for name in COLUMNS}
    for row in rows:
        unknown = row.keys() - columns.keys()
        if unknown:
            raise ValueError(f"event row has unknown columns {sorted(unknown)}")
        for name, values in columns.items():
            values.append(row.get(name))
    for name in _TIME_COLUMNS:
        columns[name] = [None if v is None else to_us(v) for v in columns[name]]
    columns["detail"] = [v if v is None or isinstance(v, str) else json.dumps(v, sort_keys=True) for v in columns["detail"]]
    return pa.Table.from_pydict(columns, schema=SCHEMA)


def read_events(run_dir: Path) -> pa.Table:
    """Every event of a run, in one table (empty, with the schema, when none were written)."""
    directory = Path(run_dir) / "events"
    parts = sorted(directory.glob("part-*.parquet"))
    if not parts:
        return SCHEMA.empty_table()
    return pa.concat_tables(pq.read_table(p, schema=SCHEMA) for p in parts)
