"""Automatic garbage collection paused while a log replays (issue 12).

Replay builds a shard's state: objects that all live on, so the collector's passes over them find
nothing, and each full pass also walks the whole process heap. Two or three such passes were a
quarter to a half of a load's time. Reference counting still frees the per-record garbage at once;
only cycles wait, and only until the last replay under way ends. A process that turned the
collector off itself keeps it off.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_replays = 0
_paused_by_us = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Nests across threads: the collector comes back when the last replay ends."""
    global _replays, _paused_by_us
    with _lock:
        if _replays == 0:
            _paused_by_us = gc.isenabled()
            gc.disable()
        _replays += 1
    try:
        yield
    finally:
        with _lock:
            _replays -= 1
            if _replays == 0 and _paused_by_us:
                _paused_by_us = False
                gc.enable()
