"""The garbage collector's policy in raygroups' processes: what a full pass walks, and when.

CPython's full pass walks every tracked object of the process and holds the GIL meanwhile, so an
actor answers nothing for as long as it takes. Two rules keep those passes off the answers' tail:

- **At start** (`settle_at_start`, every actor shell calls it before it serves): what the imports
  left (Ray's modules, kio's classes, ours: 87,000 objects in a group coordinator, 65% of its heap)
  is frozen out of the passes (gc.freeze), and a full pass waits for 100 passes of the middle
  generation rather than 10. Measured (issue 24, `latency-at-load`, 2,000 members, three runs a side): a group
  coordinator's full pass took 76-97 ms and the gateway's 69-130 ms, each one the whole p999; frozen,
  21-25 ms in a coordinator. Frozen alone, Heartbeat p999 was 26-61 ms against 64-120 ms; with the
  rarer full passes 7.5-15 ms. Young cycles are still collected as before, by the young passes;
  only garbage that outlived them waits longer for a full one.
- **While a log replays** (`full_collections_paused`): replay builds a shard's state, objects that
  all live on, so the full passes they trigger find nothing, and each one walks the whole process
  heap. Two or three of them were a quarter to a half of a load's time (issue 12). The young
  generations are still collected as usual: cycles among the per-record garbage go at once, and
  tuples of scalars (the offsets' keys) stop being tracked early, which a pause of the whole
  collector would leave to one long pass at its end.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_NEVER = 1 << 30  # a full-pass threshold no load reaches
# Middle-generation passes before a full one (CPython's default is 10; see the module docstring).
FULL_PASS_AFTER = 100
_lock = threading.Lock()
_replays = 0
_saved: tuple[int, ...] | None = None  # the thresholds to put back, while a pause of ours holds


def settle_at_start() -> None:
    """Before a process serves: freeze what the imports left, and make full passes rarer."""
    gc.collect()  # the imports' garbage first: frozen, it would never be freed (about 35 ms, once)
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_PASS_AFTER)


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
