"""Rebalance durations, per (group, generation), of classic and consumer-protocol groups.

A generation's rebalance runs from the first `rebalance_start` of the group after the previous
generation's last `rebalance_end` (any member leaving Stable opens it) to the generation's last
`rebalance_end` (every member Stable again). A start can come before the previous generation had
settled (a member told REBALANCE_IN_PROGRESS while another was still syncing); when no start lies
after the previous generation's last end, the first start after its first end opens the rebalance.
A group's first generation starts at its first `rebalance_start`.

A consumer-protocol (KIP-848) member writes the same rows with its member epoch as the generation:
`rebalance_start` when it is given an assignment that differs from what it owns (or joins), and
`rebalance_end` when it is STABLE again at an epoch, its change acknowledged. So a row here runs
from the first member given a new assignment to the last one reconciled at that epoch; members
the change does not touch move to the new epoch without a row. The `protocol` column (the
members' role, `classic` or `consumer`) lets the two be compared.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from loadtest.report.facts import TimeAxis
from loadtest.report.pipeline import is_kind


def rebalances(events: DataFrame, axis: TimeAxis) -> DataFrame:
    ends = (
        events.filter(is_kind("rebalance_end") & F.col("generation").isNotNull())
        .groupBy("group", "generation")
        .agg(F.min("ts").alias("first_end"), F.max("ts").alias("last_end"), F.countDistinct("member").alias("members"),
             F.first("role", ignorenulls=True).alias("protocol"))
    )
    by_generation = Window.partitionBy("group").orderBy("generation")
    ends = ends.withColumn("prev_last_end", F.lag("last_end").over(by_generation)).withColumn(
        "prev_first_end", F.lag("first_end").over(by_generation)
    )
    starts = events.filter(is_kind("rebalance_start")).select(
        F.col("group").alias("s_group"),
        F.col("ts").alias("s_ts"),
        F.get_json_object("detail", "$.reason").alias("reason"),
    )
    in_window = (
        (F.col("s_group") == F.col("group"))
        & (F.col("s_ts") <= F.col("last_end"))
        & (F.col("prev_first_end").isNull() | (F.col("s_ts") > F.col("prev_first_end")))
    )
    after_settled = F.col("prev_last_end").isNull() | (F.col("s_ts") > F.col("prev_last_end"))
    joined = ends.join(starts, in_window, "left")
    per_generation = joined.groupBy("group", "protocol", "generation", "last_end", "members").agg(
        F.coalesce(F.min(F.when(after_settled, F.col("s_ts"))), F.min("s_ts")).alias("start"),
        F.array_join(F.array_sort(F.collect_set(F.when(after_settled, F.col("reason")))), ",").alias("reasons"),
    )
    return per_generation.select(
        "group",
        "protocol",
        "generation",
        (F.col("start") - axis.t0).alias("start_s"),
        (F.col("last_end") - axis.t0).alias("end_s"),
        ((F.col("last_end") - F.col("start")) * 1000).alias("duration_ms"),
        "members",
        "reasons",
    ).orderBy("start_s", "group")
