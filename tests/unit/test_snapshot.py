"""kernel/snapshot.py: the one revert path, for a shard with its own keyed snapshot and for a small
shard that keeps none (copied whole); and the runtime undoing a failed write of the latter in memory."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from cluster.log import LogConfig, PartitionLog
from cluster.runtime import CoordinatorRuntime, ManualWakeups, RuntimeConfig, StorageError
from kernel.clock import ManualClock
from kernel.codec import Record, RecordCodec
from kernel.result import Result
from kernel.snapshot import KeyedSnapshot, TouchedKeys, WholeStateSnapshot, snapshot_of
from tests.full_disk import FullDisk


class Plain:
    """A shard that saves nothing itself."""

    def __init__(self, tp=None, clock=None) -> None:
        self.clock = clock
        self.values: dict[str, list[int]] = {}
        self.count = 0

    def replay(self, record: Record) -> None:
        self.values.setdefault(record.key.name, []).append(record.value.value)
        self.count += 1

    def on_loaded(self) -> Result:
        return Result()

    def add(self, name: str, value: int) -> Result:
        return Result([Record(Key(name), Value(value))], value)


class Keyed:
    def __init__(self) -> None:
        self.values: dict[str, int] = {}
        self.touched = TouchedKeys()

    def set(self, name: str, value: int) -> None:
        self.touched.save(name, lambda: self.values.get(name))
        self.values[name] = value

    def restore(self, saved) -> None:
        for name, value in saved.items():
            if value is None:
                self.values.pop(name, None)
            else:
                self.values[name] = value


@dataclass(frozen=True, slots=True)
class Key:
    name: str


@dataclass(frozen=True, slots=True)
class Value:
    value: int


CODEC = RecordCodec("snapshot-test")
CODEC.register(Key, Value, name="Entry")


def test_a_shard_with_touched_and_restore_gets_its_keyed_snapshot_and_reverts_only_what_it_touched():
    shard = Keyed()
    shard.set("a", 1)
    snapshot = snapshot_of(shard)
    assert isinstance(snapshot, KeyedSnapshot)
    snapshot.begin()
    shard.set("a", 2)
    shard.set("b", 3)
    snapshot.revert()
    assert shard.values == {"a": 1}
    snapshot.begin()
    shard.set("a", 4)
    snapshot.commit()
    assert shard.values == {"a": 4}


def test_a_shard_that_keeps_no_snapshot_is_copied_whole_and_put_back_as_it_was():
    clock = ManualClock(0)
    shard = Plain(clock=clock)
    shard.values["a"] = [1]
    snapshot = snapshot_of(shard)
    assert isinstance(snapshot, WholeStateSnapshot)
    snapshot.begin()
    shard.values["a"].append(2)  # nested containers are copies, not shared with the snapshot
    shard.values["b"] = [3]
    shard.count = 7
    shard.extra = "added during the batch"
    snapshot.revert()
    assert shard.values == {"a": [1]} and shard.count == 0 and not hasattr(shard, "extra")
    assert shard.clock is clock  # not a container: the same object, never a copy


def test_a_shard_without_a_dict_or_a_snapshot_is_refused():
    class Slotted:
        __slots__ = ("x",)

    with pytest.raises(TypeError, match="keeps no snapshot"):
        snapshot_of(Slotted())


def test_the_runtime_undoes_a_failed_write_of_a_plain_shard_in_memory(tmp_path):
    async def main():
        disk = FullDisk()
        clock = ManualClock(1_000_000)
        rt = CoordinatorRuntime(
            codec=CODEC,
            shard_factory=Plain,
            config=RuntimeConfig(data_dir=tmp_path, log_config=LogConfig(compacted=False, segment_bytes=4096)),
            executor=ThreadPoolExecutor(1),
            clock=clock,
            wakeups=ManualWakeups(clock),
            log_opener=lambda path, cfg: PartitionLog.open(path, cfg, disk),
        )
        tp = ("plain", 0)
        await rt.load(tp, 1)
        shard = rt.shard(tp)
        await rt.write(tp, 1, lambda _t: rt.shard(tp).add("a", 1))
        with disk.filled(), pytest.raises(StorageError):
            await rt.write(tp, 1, lambda _t: rt.shard(tp).add("a", 2))
        assert rt.shard(tp) is shard  # the same shard, put back: not one rebuilt from the log
        assert shard.values == {"a": [1]} and shard.count == 1
        await rt.write(tp, 1, lambda _t: rt.shard(tp).add("a", 3))
        await rt.unload(tp)
        await rt.load(tp, 2)
        assert rt.shard(tp).values == {"a": [1, 3]}
        await rt.close()

    asyncio.run(main())
