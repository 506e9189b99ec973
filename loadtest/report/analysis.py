"""The report's Spark pipeline, step by step: every aggregate collected into a `Table`, then the
tables written, the plots drawn, and the page's sections assembled."""

from __future__ import annotations

import functools
from collections import defaultdict
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from loadtest.experiment.rundir import RunDirError
from loadtest.report import final_state, pipeline, rebalance, recovery, share
from loadtest.report.facts import RunFacts, TimeAxis, time_axis
from loadtest.report.faults import FAULTS_SCHEMA, fault_rows, parse_faults
from loadtest.report.page import Page
from loadtest.report.progress import Steps
from loadtest.report.results import Results
from loadtest.report.sections import sections
from loadtest.report.tables import Table, collect, from_rows, write_tables
from loadtest.report.verdicts import Verdicts


def analyse(spark: SparkSession, facts: RunFacts, verdicts: Verdicts, out: Path, steps: Steps) -> Page:

    with steps.step("reading the event log"):
        events = pipeline.load_events(spark, facts.run_dir)
        counts_table = collect("event_counts", pipeline.event_counts(events))  # also fills the cache
        axis, counts = overview(counts_table, facts)
        faults = parse_faults(pipeline.fault_events(events).collect())
        results = Results(facts, axis, counts, faults, set(facts.groups("classic")) | set(facts.groups("consumer")),
                          facts.groups("share"))
        if not results.share_groups and counts["delivered_share"]:
            for row in share.share_topics(events).collect():
                results.share_groups.setdefault(row["group"], []).append(row["topic"])
        results.add(counts_table)
        results.add(from_rows("faults", FAULTS_SCHEMA, fault_rows(faults, axis)))
    plans = aggregations(spark, events, results)
    tables = steps.run_all("aggregating", {name: functools.partial(collect, name, plan) for name, plan in plans.items()})
    for table in tables.values():
        results.add(table)
    results.classic_groups |= {r["group"] for r in results.tables["rebalances"].dicts()}
    events.unpersist()
    writes = {t.name: functools.partial(write_tables, spark, [t], out) for t in results.tables.values()}
    steps.run_all("writing tables (Parquet and CSV)", writes)
    with steps.step("plots"):
        page_sections = sections(results, out)
    return Page(facts, axis, counts, verdicts, faults, page_sections, spark.sparkContext.master)


def aggregations(spark: SparkSession, events: DataFrame, results: Results) -> dict[str, DataFrame]:
    """Every aggregate the page shows, as a plan (nothing runs yet); the slowest first."""
    facts, axis = results.facts, results.axis
    plans: dict[str, DataFrame] = {}
    if results.share_groups:
        plans["share_states"] = share.state_timeline(
            spark, events, results.share_groups, axis, facts.delivery_count_limit, facts.lock_duration_ms
        )
    plans |= {
        "latency": pipeline.latency_over_time(events, axis),
        "throughput": pipeline.throughput_over_time(events, axis),
        "recovery": recovery.recovery_times(spark, events, results.faults),
        "final_offsets": final_state.final_offsets(spark, events, facts.run_dir),
        "rebalances": rebalance.rebalances(events, axis),
        "api_summary": pipeline.api_summary(events, axis),
        "api_errors": pipeline.api_errors(events),
    }
    if results.share_groups:
        plans["share_delivery_counts"] = share.delivery_counts(events)
    return plans


def overview(table: Table, facts: RunFacts) -> tuple[TimeAxis, dict[str, Any]]:
    """The time axis and the header's counts, from the per-(kind, role) counts."""
    rows = table.dicts()
    if not rows:
        raise RunDirError(f"{facts.run_dir}: the event log has no rows")
    by_kind: dict[str, int] = defaultdict(int)
    for row in rows:
        by_kind[row["kind"]] += row["rows"]
    delivered_share = sum(r["rows"] for r in rows if r["kind"] == "delivery" and r["role"] == "share")
    delivered_consumer = sum(r["rows"] for r in rows if r["kind"] == "delivery" and r["role"] == "consumer")
    counts: dict[str, Any] = {
        "events": sum(by_kind.values()),
        "produced": by_kind["produce"],
        "produce_failed": by_kind["produce_failed"],
        "delivered_share": delivered_share,
        "delivered_consumer": delivered_consumer,
        "delivered_classic": by_kind["delivery"] - delivered_share - delivered_consumer,
        "by_kind": dict(by_kind),
    }
    for role in ("classic", "consumer", "share", "producer"):
        counts[f"members_{role}"] = _members(rows, role)
    first = min(r["first_ts"] for r in rows)
    last = max(r["last_ts"] for r in rows)
    return time_axis(first, last), counts


def _members(rows: list[dict[str, Any]], role: str) -> int:
    """Members of a role: those that started, else the most seen in any kind of row."""
    started = [r["members"] for r in rows if r["kind"] == "member_start" and r["role"] == role]
    if started:
        return started[0]
    seen = [r["members"] for r in rows if r["role"] == role]
    if role == "producer":
        seen += [r["members"] for r in rows if r["kind"] == "produce"]
    return max(seen, default=0)
