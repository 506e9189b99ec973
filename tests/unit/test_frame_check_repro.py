"""Issue 10's finding, replayed: a 25-byte Metadata v12 request whose topics compact-array length
is the varint ff ff ff ff 0f made kio's native reader preallocate 2^32 elements and abort the
process (SIGABRT, which no `except` catches). Run in a subprocess so that, before the fix, the
abort fails this test instead of killing the test run."""

from __future__ import annotations

import struct
import subprocess
import sys

# Header v2: api key 3, version 12, correlation id 1, client id "ab", no tagged fields; then the
# topics length varint and the two booleans and tagged-field count of the body.
BODY = struct.pack(">hhih", 3, 12, 1, 2) + b"ab" + b"\x00" + b"\xff\xff\xff\xff\x0f" + b"\x00\x00\x00"
FRAME = struct.pack(">i", len(BODY)) + BODY

_SCRIPT = f"""
from cluster.gateway.connection import Close, KafkaConnection
events = KafkaConnection().receive({FRAME!r})
assert len(events) == 1 and isinstance(events[0], Close), events
print(events[0].reason)
"""


def test_the_25_byte_metadata_frame_is_closed_not_aborted():
    assert len(FRAME) == 25
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "topics" in done.stdout
