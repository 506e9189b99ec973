"""The garbage collector's full passes paused while a log replays (issue 12).

Replay builds a shard's state: objects that all live on, so the full passes they trigger find
nothing, and each one walks the whole process heap. Two or three of them were a quarter to a half of
a load's time. The young generations are still collected as usual: cycles among the per-record
garbage go at once, and tuples of scalars (the offsets' keys) stop being tracked early, which a pause
of the whole collector would leave to one long pass at its end.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_NEVER = 1 << 30  # a full-pass threshold no load reaches
_lock = threading.Lock()
_replays = 0
_saved: tuple[int, ...] | None = None  # the thresholds to put back, while a pause of ours holds


@contextmanager
def full_collections_paused() -> Iterator[None]:
    """Nests across threads: the thresholds come back when the last replay ends, unless something
    else set others meanwhile (then those stay)."""
    global _replays, _saved
    with _lock:
        if _replays == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(_saved[0], _saved[1], _NEVER)
        _replays += 1
    try:
        yield
    finally:
        with _lock:
            _replays -= 1
            if _replays == 0 and _saved is not None:
                if gc.get_threshold() == (_saved[0], _saved[1], _NEVER):
                    gc.set_threshold(*_saved)
                _saved = None
