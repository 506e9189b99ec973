"""Time to recover after each fault, from two points of view.

- `recovery` rows: the runner's first success against each fault target (a group, a partition,
  a broker) after the fault; their `latency_ms` counts from the fault.
- `group_state` rows: the monitor's first `Stable` view of each group at or after the fault's end
  (its `fault_end`, else the fault itself), for every group that had members when the fault hit
  (its last view before the fault is not Empty/Dead with 0 members). `disturbed` says whether the
  monitor saw the group anything but Stable (or could not describe it) in between: a group seen
  Stable throughout "recovers" at the next monitor sample, which is not a recovery.

Both count from the fault's start (`since_fault_ms`) and from its end (`since_fault_end_ms`).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from loadtest.report.faults import Fault
from loadtest.report.pipeline import is_kind, ok

_GONE = ("Empty", "Dead")


def recovery_times(spark: SparkSession, events: DataFrame, faults: list[Fault]) -> DataFrame:
    fault_frame = spark.createDataFrame(
        [(f.fault_id, f.start, f.settled) for f in faults], "fault_id INT, f_start DOUBLE, f_end DOUBLE"
    )
    return _from_recovery_rows(events, fault_frame).unionByName(_from_group_state(events, fault_frame)).orderBy(
        "fault_id", "source", "target"
    )


def _from_recovery_rows(events: DataFrame, fault_frame: DataFrame) -> DataFrame:
    rows = events.filter(is_kind("recovery") & F.col("fault_id").isNotNull())
    return rows.join(F.broadcast(fault_frame), "fault_id", "left").select(
        "fault_id",
        F.lit("recovery").alias("source"),
        F.col("target"),
        F.col("latency_ms").alias("since_fault_ms"),
        (F.col("latency_ms") - (F.col("f_end") - F.col("f_start")) * 1000).alias("since_fault_end_ms"),
        F.lit(None).cast("boolean").alias("disturbed"),
    )


def _from_group_state(events: DataFrame, fault_frame: DataFrame) -> DataFrame:
    views = events.filter(is_kind("group_state") & F.col("group").isNotNull()).select(
        "group",
        "ts",
        "state",
        F.get_json_object("detail", "$.members").cast("int").alias("members"),
        # A failed describe (state null) counts as not Stable.
        F.coalesce(ok() & (F.col("state") == "Stable"), F.lit(False)).alias("stable"),
    )
    pairs = views.crossJoin(F.broadcast(fault_frame))
    # The group's last view before the fault: was anyone in it?
    before = (
        pairs.filter(F.col("ts") <= F.col("f_start"))
        .groupBy("fault_id", "group")
        .agg(F.max_by(F.struct("state", "members"), "ts").alias("last"))
        .filter(~(F.col("last.state").isin(*_GONE) & (F.coalesce(F.col("last.members"), F.lit(0)) == 0)))
        .select("fault_id", "group")
    )
    after = (
        pairs.filter(F.col("ts") >= F.col("f_start"))
        .groupBy("fault_id", "group", "f_start", "f_end")
        .agg(
            F.min(F.when(F.col("stable") & (F.col("ts") >= F.col("f_end")), F.col("ts"))).alias("stable_ts"),
            F.min(F.when(~F.col("stable"), F.col("ts"))).alias("unstable_ts"),
        )
    )
    unstable, stable = F.col("unstable_ts"), F.col("stable_ts")
    disturbed = unstable.isNotNull() & (stable.isNull() | (unstable <= stable))
    return after.join(before, ["fault_id", "group"]).select(
        "fault_id",
        F.lit("group Stable").alias("source"),
        F.col("group").alias("target"),
        ((F.col("stable_ts") - F.col("f_start")) * 1000).alias("since_fault_ms"),
        ((F.col("stable_ts") - F.col("f_end")) * 1000).alias("since_fault_end_ms"),
        disturbed.alias("disturbed"),
    )
