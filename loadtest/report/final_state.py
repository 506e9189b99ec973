"""Where each group ended, per partition: the clients' view (`drained`, `end_offset` rows) next to
the coordinators' own records (`records/*.parquet`, when the run decoded them).

- `committed_offset`: the last `OffsetCommit` record of (group, topic, partition) in
  `__consumer_offsets` (null if that record is a tombstone);
- `share_start_offset` and the `share_*` counts: the final durable share state, counting the
  offsets at or after the start offset in batches of each delivery state.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from loadtest.experiment import rundir
from loadtest.report.pipeline import is_kind

_KEY = ["group", "topic", "partition"]
_DELIVERY_STATES = {"available": 0, "acquired": 1, "acknowledged": 2, "archived": 4}


def final_offsets(spark: SparkSession, events: DataFrame, run_dir: Path) -> DataFrame:
    ends = events.filter(is_kind("end_offset")).groupBy("topic", "partition").agg(F.max("offset").alias("end_offset"))
    drained = (
        events.filter(is_kind("drained"))
        .groupBy(*_KEY)
        .agg(F.max_by(F.struct("role", "offset", "state"), "ts").alias("d"))
        .select(*_KEY, F.col("d.role").alias("role"), F.col("d.offset").alias("drained_offset"),
                F.col("d.state").alias("drained_state"))
    )
    table = drained
    committed = _committed(spark, Path(run_dir) / rundir.CONSUMER_OFFSETS_RECORDS)
    if committed is not None:
        table = table.join(committed, _KEY, "full")
    share = _share_final(spark, Path(run_dir) / rundir.SHARE_STATE_FINAL)
    if share is not None:
        table = table.join(share, _KEY, "full")
    for name in ("committed_offset", "share_start_offset", *[f"share_{s}" for s in _DELIVERY_STATES]):
        if name not in table.columns:
            table = table.withColumn(name, F.lit(None).cast("bigint"))
    role = F.coalesce(
        F.col("role"),
        F.when(F.col("share_start_offset").isNotNull(), F.lit("share")),
        F.when(F.col("committed_offset").isNotNull(), F.lit("classic")),
    )
    return (
        table.join(ends, ["topic", "partition"], "left")
        .select(
            "group", role.alias("role"), "topic", "partition", "end_offset", "drained_offset", "drained_state",
            (F.col("end_offset") - F.col("drained_offset")).alias("remaining"),
            "committed_offset", "share_start_offset", *[f"share_{s}" for s in _DELIVERY_STATES],
        )
        .orderBy("group", "topic", "partition")
    )


def _committed(spark: SparkSession, path: Path) -> DataFrame | None:
    if not path.is_file():
        return None
    records = spark.read.parquet(str(path)).filter(F.col("record_type") == "OffsetCommit")
    # One coordinator partition holds all of a group's records, so its offsets order them.
    latest = F.max_by(F.when(F.col("value").isNotNull(), F.col("committed_offset")), F.col("offset"))
    return records.groupBy("group", "topic", F.col("topic_partition").alias("partition")).agg(
        latest.alias("committed_offset")
    )


def _share_final(spark: SparkSession, path: Path) -> DataFrame | None:
    if not path.is_file():
        return None
    final = spark.read.parquet(str(path))
    start = F.col("start_offset")
    batches = final.select(
        "group", "topic", F.col("topic_partition").alias("partition"), "start_offset",
        F.explode_outer("batches").alias("b"),
    )
    # Offsets of a batch at or after the start offset (those below it are done whatever the batch says).
    size = F.greatest(F.col("b.last_offset") - F.greatest(F.col("b.first_offset"), start) + 1, F.lit(0))
    return batches.groupBy(*_KEY).agg(
        F.max("start_offset").alias("share_start_offset"),
        *[
            F.sum(F.when(F.col("b.delivery_state") == code, size).otherwise(0)).cast("bigint").alias(f"share_{name}")
            for name, code in _DELIVERY_STATES.items()
        ],
    )
