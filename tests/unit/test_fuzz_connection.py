"""The structured fuzz (tests/fuzz) against KafkaConnection, without Ray: tens of thousands of
frames over every advertised (API, version), valid and broken. Run in a subprocess so that a
frame which aborts the process (as kio's preallocation did) fails this test, not the run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.fuzz.frames import KINDS, frames
from tests.fuzz.generate import FAULTS, every_api_version

FRAMES = 60_000

_SCRIPT = """
import json, resource, sys
from tests.fuzz.frames import frames
from tests.fuzz.outcomes import Tally, feed
seed, count = int(sys.argv[1]), int(sys.argv[2])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tally = Tally()
for frame in frames(seed, count):
    feed(frame, tally)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({"frames": tally.frames, "failures": tally.failures[:20], "slowest": tally.slowest,
                  "outcomes": dict(tally.outcomes), "rss_grown_kib": grown,
                  "by_kind": [[k, o, n] for (k, o), n in tally.by_kind.items()]}))
"""


@pytest.mark.parametrize("seed", [1, 2])
def test_every_fuzzed_frame_gets_a_reply_or_a_close(seed):
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(seed), str(FRAMES // 2)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    result = json.loads(done.stdout)
    assert result["failures"] == []
    assert result["frames"] == FRAMES // 2
    assert result["slowest"] < 1.0  # seconds for one frame: the walk is linear in the frame
    assert result["rss_grown_kib"] < 256 * 1024
    # Each kind of breakage both reached the parser and was refused somewhere.
    seen = {(kind, outcome) for kind, outcome, _ in result["by_kind"]}
    for kind in [k for k in KINDS if k != "fault"] + [f"fault:{f}" for f in FAULTS]:
        assert (kind, "close") in seen or kind in ("valid", "junk"), kind
    assert ("valid", "close") not in seen  # a request built from the schema always parses
    assert result["outcomes"].get("close: null in a non-nullable field", 0) > 0
    assert result["outcomes"].get("close: array longer than the frame", 0) > 0


def test_the_stream_covers_every_advertised_version_and_is_reproducible():
    stream = list(frames(7, 2 * len(every_api_version())))
    assert {(f.api_key, f.api_version) for f in stream} == set(every_api_version())
    assert [f.data for f in frames(7, 50)] == [f.data for f in stream[:50]]
