"""Spark over the event log: reading it, and the traffic aggregations (counts, latency, throughput,
the per-API table). Every function returns a DataFrame of a small aggregate; `tables.collect` runs it.

Times are handled as epoch seconds (`ts`: a double), so no aggregation depends on the
session's timezone; the tables give times as seconds since the run's first event (`t_s`).
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from loadtest.experiment import rundir
from loadtest.report.facts import TimeAxis

# The event log's schema (loadtest/experiment/eventlog.py SCHEMA) in Spark's terms. Given, not
# inferred: every part is read the same way even if an early part has only null columns.
EVENT_SCHEMA = ", ".join(
    [
        "time TIMESTAMP", "kind STRING", "role STRING", "member STRING", "member_id STRING", "group STRING",
        "api STRING", "broker STRING", "correlation BIGINT", "request_time TIMESTAMP", "latency_ms DOUBLE",
        "error STRING", "topic STRING", "partition INT", "offset BIGINT", "generation INT",
        "delivery_count SMALLINT", "ack_type STRING", "state STRING", "fault_id INT", "target STRING",
        "key STRING", "detail STRING",
    ]
)
# Columns no aggregation reads: left out of the cached copy.
_UNUSED = ("broker", "correlation", "key", "member_id", "time", "request_time")


def event_parts(run_dir: Path) -> list[Path]:
    # Listed, not globbed by Spark: a part being written is `part-NNNNN.tmp` and must not be read.
    return sorted((Path(run_dir) / rundir.EVENTS).glob("part-*.parquet"))


def load_events(spark: SparkSession, run_dir: Path) -> DataFrame:
    """The event log as one cached DataFrame, with `ts`: `time` as epoch seconds."""
    frame = spark.read.schema(EVENT_SCHEMA).parquet(*[str(p) for p in event_parts(run_dir)])
    frame = frame.withColumn("ts", F.col("time").cast("double"))
    return frame.drop(*_UNUSED).cache()


def is_kind(*kinds: str) -> Column:
    return F.col("kind").isin(*kinds) if len(kinds) > 1 else F.col("kind") == kinds[0]


def bucket(axis: TimeAxis, column: str = "ts") -> Column:
    return F.floor((F.col(column) - F.lit(axis.t0)) / F.lit(axis.bucket_s))


def ok(column: str = "error") -> Column:
    """A success: error NONE (or not given)."""
    return F.coalesce(F.col(column), F.lit("NONE")) == "NONE"


def event_counts(events: DataFrame) -> DataFrame:
    """Rows and distinct members per (kind, role), and the first and last event time.

    The first job of the report: it also fills the cache every later job reads.
    """
    return (
        events.groupBy("kind", "role")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.countDistinct("member").alias("members"),
            F.min("ts").alias("first_ts"),
            F.max("ts").alias("last_ts"),
        )
        .orderBy("kind", "role")
    )


def fault_events(events: DataFrame) -> DataFrame:
    """The fault and fault_end rows (a handful): collected and parsed in Python."""
    return events.filter(is_kind("fault", "fault_end")).select("kind", "fault_id", "ts", "target", "detail").orderBy("ts")


def latency_over_time(events: DataFrame, axis: TimeAxis) -> DataFrame:
    """p50/p99/max response latency per (API, bucket)."""
    responses = events.filter(is_kind("response") & F.col("api").isNotNull() & F.col("latency_ms").isNotNull())
    return (
        responses.groupBy("api", bucket(axis).alias("b"))
        .agg(
            F.count(F.lit(1)).alias("responses"),
            F.percentile_approx("latency_ms", [0.5, 0.99], 1000).alias("q"),
            F.max("latency_ms").alias("max_ms"),
        )
        .select(
            "api",
            (F.col("b") * axis.bucket_s).cast("double").alias("t_s"),
            "responses",
            F.col("q")[0].alias("p50_ms"),
            F.col("q")[1].alias("p99_ms"),
            "max_ms",
        )
        .orderBy("api", "t_s")
    )


def throughput_over_time(events: DataFrame, axis: TimeAxis) -> DataFrame:
    """Per bucket: requests sent per API, records produced, records delivered (classic / consumer /
    share)."""
    share = (F.col("role") == "share") | F.col("delivery_count").isNotNull()
    series = (
        F.when(is_kind("request"), F.col("api"))
        .when(is_kind("produce"), F.lit("produced"))
        .when(share, F.lit("delivered (share)"))
        .when(F.col("role") == "consumer", F.lit("delivered (consumer)"))
        .otherwise(F.lit("delivered (classic)"))
    )
    what = F.when(is_kind("request"), F.lit("requests")).otherwise(F.lit("records"))
    rows = events.filter((is_kind("request") & F.col("api").isNotNull()) | is_kind("produce", "delivery"))
    return (
        rows.groupBy(bucket(axis).alias("b"), what.alias("what"), series.alias("series"))
        .agg(F.count(F.lit(1)).alias("count"))
        .select(
            (F.col("b") * axis.bucket_s).cast("double").alias("t_s"),
            "what",
            "series",
            "count",
            (F.col("count") / axis.bucket_s).alias("per_s"),
        )
        .orderBy("what", "series", "t_s")
    )


def api_summary(events: DataFrame, axis: TimeAxis) -> DataFrame:
    """One row per API: requests sent, responses, errors, requests/s, p50/p99/max latency."""
    response = is_kind("response")
    latency = F.when(response, F.col("latency_ms"))
    rows = events.filter(is_kind("request", "response") & F.col("api").isNotNull())
    duration = max(axis.duration_s, 1.0)
    return (
        rows.groupBy("api")
        .agg(
            F.sum(F.when(is_kind("request"), 1).otherwise(0)).alias("requests"),
            F.sum(F.when(response, 1).otherwise(0)).alias("responses"),
            F.sum(F.when(response & ~ok(), 1).otherwise(0)).alias("errors"),
            F.percentile_approx(latency, [0.5, 0.99], 10000).alias("q"),
            F.max(latency).alias("max_ms"),
        )
        .select(
            "api",
            "requests",
            "responses",
            "errors",
            # Sent requests when the log has them, else answered ones.
            (F.greatest("requests", "responses") / F.lit(duration)).alias("requests_per_s"),
            F.col("q")[0].alias("p50_ms"),
            F.col("q")[1].alias("p99_ms"),
            "max_ms",
        )
        .orderBy(F.desc("requests"), "api")
    )


def api_errors(events: DataFrame) -> DataFrame:
    """Failed responses per (API, error name)."""
    return (
        events.filter(is_kind("response") & ~ok() & F.col("api").isNotNull())
        .groupBy("api", "error")
        .agg(F.count(F.lit(1)).alias("responses"))
        .orderBy("api", F.desc("responses"))
    )
