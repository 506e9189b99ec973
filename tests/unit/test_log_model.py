"""cluster/log/ against a model: random appends, reads, crashes with torn tails, restarts, flipped bytes."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cluster import recordbatch as rb
from cluster.log import CHECKPOINT_NAME, LogConfig, PartitionLog
from tests.unit.log_helpers import batch, crash, header, records, segment_files, split


# -- the model-based test -------------------------------------------------------------------

record_strategy = st.tuples(st.binary(min_size=1, max_size=6), st.one_of(st.none(), st.binary(max_size=40)))
batch_strategy = st.tuples(st.lists(record_strategy, min_size=1, max_size=5), st.integers(0, 2**40))
# What a crash leaves at the end of the last segment: nothing, garbage, or a torn write of a batch.
TAILS = st.one_of(st.none(), st.binary(min_size=1, max_size=120), st.tuples(batch_strategy, st.data()))


class LogMachine(RuleBasedStateMachine):
    """Random appends, reads, crashes (with torn tails), clean restarts and flipped bytes.

    The model is the list of batches appended so far; with flush=batch every append is durable,
    so after any reopen the log must hold exactly the model, minus what a corruption removed.
    """

    config = LogConfig(segment_bytes=500)

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="rglog-"))
        self.path = self.root / "topic-0"
        self.log = PartitionLog.open(self.path, self.config)
        self.model: list[bytes] = []

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def model_end(self) -> int:
        return header(self.model[-1]).last_offset + 1 if self.model else 0

    @rule(specs=st.lists(batch_strategy, min_size=1, max_size=3), epoch=st.integers(0, 3))
    def append(self, specs: list, epoch: int) -> None:
        batches = [batch(records, ts) for records, ts in specs]
        expected = []
        offset = self.model_end
        for b in batches:
            expected.append(offset)
            offset += header(b).last_offset_delta + 1
        assert self.log.append(batches, epoch) == expected
        self.model.extend(bytes(b) for b in batches)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.model_end), label="offset")
        max_bytes = data.draw(st.integers(0, 1_000), label="max_bytes")
        out = self.log.read(offset, max_bytes)
        if offset == self.model_end:
            assert out == b""
            return
        got = split(out)
        start = next(i for i, b in enumerate(self.model) if header(b).last_offset >= offset)
        if not self.config.compacted:  # a compacted log serves the first batch after a gap
            assert header(got[0]).base_offset <= offset
        assert got == self.model[start : start + len(got)]
        assert len(got) == 1 or len(out) <= max_bytes

    @rule(tail=TAILS)
    def crash_and_reopen(self, tail: None | bytes | tuple) -> None:
        crash(self.log)
        self.log = None  # type: ignore[assignment]
        if isinstance(tail, tuple):  # a torn write: a strict prefix of the next batch
            (records, ts), data = tail
            torn = batch(records, ts)
            rb.assign_offset(torn, self.model_end, 0)
            tail = bytes(torn[: data.draw(st.integers(1, len(torn) - 1), label="torn length")])
        if tail is not None:
            with open(segment_files(self.path)[-1], "ab") as f:
                f.write(tail)
        self.reopen(expect_truncated=tail is not None)

    @rule()
    def close_and_reopen(self) -> None:
        self.log.close()
        self.reopen(expect_truncated=False)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def flip_a_byte_in_the_last_batch(self, data: st.DataObject) -> None:
        crash(self.log)
        self.log = None  # type: ignore[assignment]
        last = self.model[-1]
        holder = [p for p in segment_files(self.path) if int(p.name[:20]) <= header(last).base_offset][-1]
        contents = bytearray(holder.read_bytes())
        position = len(contents) - len(last)
        assert contents[position:] == last
        # Everything from the magic byte on is checked (the epoch before it is not under the CRC).
        flip = position + data.draw(st.integers(rb.LOG_OVERHEAD + 4, len(last) - 1), label="byte")
        contents[flip] ^= data.draw(st.integers(1, 255), label="mask")
        holder.write_bytes(bytes(contents))
        self.model.pop()
        self.reopen(expect_truncated=True)

    @precondition(lambda self: self.config.compacted)
    @rule(now_ms=st.integers(0, 2**40 + 2_000))
    def compact(self, now_ms: int) -> None:
        active_base = int(segment_files(self.path)[-1].name[:20])
        horizon = now_ms - self.config.tombstone_retention_ms
        stored = [(r, header(b).max_timestamp) for b in self.model for r in rb.decode_records(b)]
        latest = {key: offset for (offset, key, _), _ in stored}
        expected = [
            (offset, key, value)
            for (offset, key, value), max_timestamp in stored
            if offset >= active_base
            or (latest[key] == offset and not (value is None and max_timestamp < horizon))
        ]
        self.log.compact(now_ms)
        assert records(self.log) == expected
        self.model = list(self.log.batches())  # from here on the compacted bytes are the model

    def reopen(self, expect_truncated: bool) -> None:
        self.log = PartitionLog.open(self.path, self.config)
        assert self.log.recovery.truncated is expect_truncated, self.log.recovery
        assert (self.log.recovery.reason is not None) is expect_truncated
        assert not (self.path / CHECKPOINT_NAME).exists()
        assert list(self.log.batches()) == self.model
        assert self.log.recovery.batches == len(self.model)

    @invariant()
    def offsets_match_the_model(self) -> None:
        assert self.log.end_offset == self.model_end
        assert self.log.log_start_offset == 0


class CompactedLogMachine(LogMachine):
    """The same, on a compacted log (gaps allowed between batches), with compactions in between."""

    config = LogConfig(segment_bytes=500, compacted=True, tombstone_retention_ms=1_000)


MACHINE_SETTINGS = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
LogMachine.TestCase.settings = MACHINE_SETTINGS
CompactedLogMachine.TestCase.settings = MACHINE_SETTINGS
TestLogMachine = LogMachine.TestCase
TestCompactedLogMachine = CompactedLogMachine.TestCase
