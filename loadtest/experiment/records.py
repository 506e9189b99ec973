"""The coordinators' own records of a run, decoded to Parquet (docs/experiments.md).

After the cluster stopped, every partition log of `__consumer_offsets` and `__share_group_state`
in the data directory is read batch by batch and each record decoded with the coordinators' own
codecs. The final durable share state is rebuilt the way a share coordinator rebuilds it on
failover: by replaying its partitions' records into a `ShareCoordinatorShard`. Logs are compacted,
so what is read is the latest value of each key (and whatever compaction has not reached yet),
not every record ever written.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cluster.log import LogConfig, PartitionLog
from cluster.recordbatch import decode_records, parse_header
from kernel.clock import ManualClock
from kernel.codec import field_names, is_record_class
from coordinator.records import CODEC as GROUP_CODEC
from loadtest.experiment import rundir
from sharestate.coordinator_shard import ShareCoordinatorShard
from sharestate.records import CODEC as SHARE_CODEC

CONSUMER_OFFSETS = "__consumer_offsets"
SHARE_GROUP_STATE = "__share_group_state"
_MS = pa.timestamp("ms", tz="UTC")
_BATCH = pa.struct([("first_offset", pa.int64()), ("last_offset", pa.int64()), ("delivery_state", pa.int8()),
                    ("delivery_count", pa.int16())])

CONSUMER_OFFSETS_SCHEMA = pa.schema([
    ("partition", pa.int32()), ("offset", pa.int64()), ("time", _MS), ("record_type", pa.string()),
    ("group", pa.string()), ("key", pa.string()), ("value", pa.string()), ("topic", pa.string()),
    ("topic_partition", pa.int32()), ("committed_offset", pa.int64()), ("generation", pa.int32()),
])
SHARE_STATE_SCHEMA = pa.schema([
    ("partition", pa.int32()), ("offset", pa.int64()), ("time", _MS), ("record_type", pa.string()),
    ("tombstone", pa.bool_()), ("group", pa.string()), ("topic_id", pa.string()), ("topic", pa.string()),
    ("topic_partition", pa.int32()), ("start_offset", pa.int64()), ("state_epoch", pa.int32()),
    ("leader_epoch", pa.int32()), ("batches", pa.list_(_BATCH)),
])
SHARE_FINAL_SCHEMA = pa.schema([
    ("group", pa.string()), ("topic_id", pa.string()), ("topic", pa.string()), ("topic_partition", pa.int32()),
    ("start_offset", pa.int64()), ("state_epoch", pa.int32()), ("batches", pa.list_(_BATCH)),
])


def decode_run_records(run_dir: Path, data_dir: Path, topic_names: dict[str, str]) -> dict[str, int]:
    """Write the three records files; `topic_names` maps topic ids (str) to names. Returns row counts."""
    out = Path(run_dir) / rundir.RECORDS
    out.mkdir(parents=True, exist_ok=True)
    offsets = [_offsets_row(p, o, ts, rec) for p, o, ts, rec in _records(data_dir, CONSUMER_OFFSETS, GROUP_CODEC)]
    pq.write_table(pa.Table.from_pylist(offsets, schema=CONSUMER_OFFSETS_SCHEMA), Path(run_dir) / rundir.CONSUMER_OFFSETS_RECORDS)
    shards: dict[int, ShareCoordinatorShard] = {}
    share_rows = []
    for p, o, ts, rec in _records(data_dir, SHARE_GROUP_STATE, SHARE_CODEC):
        share_rows.append(_share_row(p, o, ts, rec, topic_names))
        shard = shards.get(p)
        if shard is None:
            clock = ManualClock(0)
            shard = shards[p] = ShareCoordinatorShard((SHARE_GROUP_STATE, p), clock)
        shard.replay(rec)
    pq.write_table(pa.Table.from_pylist(share_rows, schema=SHARE_STATE_SCHEMA), Path(run_dir) / rundir.SHARE_STATE_RECORDS)
    final = []
    for shard in shards.values():
        for key, state in shard.states.items():
            final.append({
                "group": key.group_id, "topic_id": str(key.topic_id), "topic": topic_names.get(str(key.topic_id)),
                "topic_partition": key.partition, "start_offset": state.start_offset, "state_epoch": state.state_epoch,
                "batches": [_batch(b) for b in state.state_batches],
            })
    pq.write_table(pa.Table.from_pylist(final, schema=SHARE_FINAL_SCHEMA), Path(run_dir) / rundir.SHARE_STATE_FINAL)
    return {"consumer_offsets": len(offsets), "share_group_state": len(share_rows), "share_state_final": len(final)}


def _records(data_dir: Path, topic: str, codec: Any) -> Iterator[tuple[int, int, int, Any]]:
    """(partition, offset, batch timestamp ms, Record) of every record of every partition of `topic`."""
    for directory in sorted(Path(data_dir).glob(f"{topic}-*"), key=lambda d: int(d.name.rsplit("-", 1)[1])):
        partition = int(directory.name.rsplit("-", 1)[1])
        log = PartitionLog.open(directory, LogConfig(compacted=True))
        try:
            for batch in log.batches():
                header = parse_header(batch)
                for offset, key, value in decode_records(batch):
                    if key is None:
                        continue
                    yield partition, offset, header.max_timestamp, codec.decode(key, value)
        finally:
            log.close()


def _offsets_row(partition: int, offset: int, ts: int, record: Any) -> dict[str, Any]:
    key, value = record.key, record.value
    row = {
        "partition": partition, "offset": offset, "time": ts, "record_type": _type_name(key),
        "group": getattr(key, "group_id", None), "key": _json(key), "value": None if value is None else _json(value),
    }
    if row["record_type"] == "OffsetCommit":
        row.update(topic=key.topic, topic_partition=key.partition,
                   committed_offset=None if value is None else value.offset)
    elif row["record_type"] == "GroupMetadata" and value is not None:
        row["generation"] = value.generation
    return row


def _share_row(partition: int, offset: int, ts: int, record: Any, topic_names: dict[str, str]) -> dict[str, Any]:
    key, value = record.key, record.value
    row = {
        "partition": partition, "offset": offset, "time": ts, "record_type": _type_name(key),
        "tombstone": value is None, "group": key.group_id, "topic_id": str(key.topic_id),
        "topic": topic_names.get(str(key.topic_id)), "topic_partition": key.partition,
    }
    if value is not None:
        row.update(start_offset=value.start_offset, state_epoch=getattr(value, "state_epoch", None),
                   leader_epoch=value.leader_epoch, batches=[_batch(b) for b in value.state_batches])
    return row


def _batch(b: Any) -> dict[str, int]:
    return {"first_offset": b.first_offset, "last_offset": b.last_offset, "delivery_state": int(b.delivery_state),
            "delivery_count": b.delivery_count}


def _type_name(key: Any) -> str:
    return type(key).__name__.removesuffix("Key")


def _json(obj: Any) -> str:
    return json.dumps(_as_dict(obj), default=_plain, sort_keys=True)


def _as_dict(obj: Any) -> Any:
    """A record's fields, nested records too; most record classes are dataclasses, the hot
    OffsetCommit ones msgspec Structs (coordinator/classic/records.py)."""
    if is_record_class(type(obj)):
        return {name: _as_dict(getattr(obj, name)) for name in field_names(obj)}
    if isinstance(obj, (list, tuple)):
        return [_as_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _as_dict(v) for k, v in obj.items()}
    return obj


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)
