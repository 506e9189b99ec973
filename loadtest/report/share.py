"""Share groups: the delivery-count histogram, and each group's records by state over time.

The state of a record (group, topic, partition, offset), as the clients saw it:
- AVAILABLE from its `produce` row (into a topic the group consumes), after a successful RELEASE
  below the delivery-count limit, or when its acquisition lock expires unacknowledged;
- ACQUIRED from each `delivery`;
- ACKNOWLEDGED after a successful ACCEPT (`ack` with error NONE);
- ARCHIVED after a successful REJECT, or a RELEASE / lock expiry at the delivery-count limit (the
  RELEASE's own `delivery_count`, the expired delivery's).
A failed ack changes nothing: the lock still holds. A delivery whose next event is another
delivery more than `lock duration` later, or that is the record's last event, expired at
delivery + lock duration. A record's `produce` row comes first whatever its time (the producer's
ack can be slower than a consumer), and counts from the earlier of its time and the next event's.

One window pass per record (ordered: produce first, then by time, delivery < ack at one instant)
turns each event into at most three moves of one record between states (-1 from the state it
leaves, +1 to the one it enters): its own change, the expiry before it, the expiry after the last
delivery. Summed per time bucket and run up, they are the records in each state at the end of
each bucket.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from loadtest.report.facts import TimeAxis
from loadtest.report.pipeline import bucket, is_kind, ok

# The share coordinator's codes for the states (docs/experiments.md, `delivery_state`).
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
STATES = {"AVAILABLE": AVAILABLE, "ACQUIRED": ACQUIRED, "ACKNOWLEDGED": ACKNOWLEDGED, "ARCHIVED": ARCHIVED}
_RECORD = ["gt", "partition", "offset"]
_PRODUCE, _DELIVERY, _ACK = 0, 1, 2  # order of events at the same instant


def share_topics(events: DataFrame) -> DataFrame:
    """(group, topic) pairs seen in share deliveries: the fallback when run.json lists no share groups."""
    return events.filter(is_kind("delivery") & share_row()).select("group", "topic").distinct()


def share_row() -> Column:
    return (F.col("role") == "share") | F.col("delivery_count").isNotNull()


def delivery_counts(events: DataFrame) -> DataFrame:
    """Deliveries per (share group, delivery_count)."""
    return (
        events.filter(is_kind("delivery") & F.col("delivery_count").isNotNull())
        .groupBy("group", "delivery_count")
        .agg(F.count(F.lit(1)).alias("deliveries"))
        .orderBy("group", "delivery_count")
    )


def state_timeline(
    spark: SparkSession, events: DataFrame, topics: dict[str, list[str]], axis: TimeAxis, limit: int, lock_ms: float
) -> DataFrame:
    """Per (share group, bucket): records AVAILABLE / ACQUIRED / ACKNOWLEDGED / ARCHIVED at its end."""
    names = sorted(topics)
    pairs = spark.createDataFrame(
        [(i, names.index(g), g, t) for i, (g, t) in enumerate((g, t) for g in names for t in topics[g])],
        "gt INT, gid INT, group STRING, topic STRING",
    )
    groups = pairs.select("gid", "group").distinct()
    moves = _moves(_client_events(events, pairs, limit), limit, lock_ms / 1000)
    per_bucket = moves.groupBy("gid", bucket(axis).alias("b")).agg(
        *[F.sum(F.when(F.col("state") == code, F.col("delta")).otherwise(0)).alias(name) for name, code in STATES.items()]
    )
    # Every bucket of every group, so the running sums carry through quiet seconds.
    grid = spark.range(axis.buckets).select(F.col("id").alias("b")).crossJoin(F.broadcast(groups))
    running = Window.partitionBy("gid").orderBy("b").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return (
        grid.join(per_bucket, ["gid", "b"], "left")
        .select(
            "group",
            ((F.col("b") + 1) * axis.bucket_s).cast("double").alias("t_s"),
            *[F.sum(F.coalesce(F.col(name), F.lit(0))).over(running).alias(name.lower()) for name in STATES],
        )
        .orderBy("group", "t_s")
    )


def _released(count: Column, limit: int) -> Column:
    """Where a released or expired record goes: ARCHIVED at the delivery-count limit."""
    return F.when(F.coalesce(count, F.lit(0)) >= limit, F.lit(ARCHIVED)).otherwise(F.lit(AVAILABLE))


def _client_events(events: DataFrame, pairs: DataFrame, limit: int) -> DataFrame:
    """Every event that changes a share record's state: (gt, gid, partition, offset, ts, order, state,
    delivery_count), a record being (gt: its group and topic, partition, offset), all numbers: the
    window below sorts them, and numbers sort faster than strings."""
    # A produce row has no group: it becomes one record per share group reading its topic.
    produced = events.filter(is_kind("produce")).drop("group").join(F.broadcast(pairs), "topic").select(
        *_RECORD, "gid", "ts", F.lit(_PRODUCE).alias("order"), F.lit(AVAILABLE).alias("state"),
        F.lit(None).cast("smallint").alias("delivery_count"),
    )
    share = events.join(F.broadcast(pairs), ["group", "topic"])
    delivered = share.filter(is_kind("delivery")).select(
        *_RECORD, "gid", "ts", F.lit(_DELIVERY).alias("order"), F.lit(ACQUIRED).alias("state"), "delivery_count"
    )
    acked_state = (
        F.when(F.col("ack_type") == "ACCEPT", F.lit(ACKNOWLEDGED))
        .when(F.col("ack_type") == "REJECT", F.lit(ARCHIVED))
        .otherwise(_released(F.col("delivery_count"), limit))
    )
    acked = share.filter(is_kind("ack") & ok() & F.col("ack_type").isin("ACCEPT", "RELEASE", "REJECT")).select(
        *_RECORD, "gid", "ts", F.lit(_ACK).alias("order"), acked_state.alias("state"), "delivery_count"
    )
    return produced.unionByName(delivered).unionByName(acked)


def _moves(stream: DataFrame, limit: int, lock_s: float) -> DataFrame:
    """(gid, ts, state, delta): +1 into a state, -1 out of one (see the module docstring)."""
    w = Window.partitionBy(*_RECORD).orderBy((F.col("order") != _PRODUCE).cast("int"), "ts", "order")
    delivery = F.col("order") == _DELIVERY
    stream = stream.select(
        "gid", "ts", "order", "state", "delivery_count",
        F.lag("state").over(w).alias("prev_state"), F.lag("order").over(w).alias("prev_order"),
        F.lag("ts").over(w).alias("prev_ts"), F.lag("delivery_count").over(w).alias("prev_count"),
        F.lead("ts").over(w).alias("next_ts"),
    )
    expired_before = delivery & (F.col("prev_order") == _DELIVERY) & (F.col("ts") > F.col("prev_ts") + lock_s)
    before = F.when(expired_before, _released(F.col("prev_count"), limit)).otherwise(F.col("prev_state"))
    changed = before.isNull() | (before != F.col("state"))
    at = F.when(F.col("order") == _PRODUCE, F.least("ts", F.coalesce("next_ts", "ts"))).otherwise(F.col("ts"))
    expires_after = delivery & F.col("next_ts").isNull()

    def move(when: Column, time: Column, state: Column, delta: int) -> Column:
        return F.struct(time.alias("ts"), F.when(when, state).alias("state"), F.lit(delta).alias("delta"))

    moves = F.array(
        move(changed, at, F.col("state"), 1),
        move(changed, at, before, -1),
        move(expired_before, F.col("prev_ts") + lock_s, F.lit(ACQUIRED), -1),
        move(expired_before, F.col("prev_ts") + lock_s, _released(F.col("prev_count"), limit), 1),
        move(expires_after, F.col("ts") + lock_s, F.lit(ACQUIRED), -1),
        move(expires_after, F.col("ts") + lock_s, _released(F.col("delivery_count"), limit), 1),
    )
    return (
        stream.select("gid", F.explode(moves).alias("m"))
        .select("gid", F.col("m.ts").alias("ts"), F.col("m.state").alias("state"), F.col("m.delta").alias("delta"))
        .filter(F.col("state").isNotNull())
    )
