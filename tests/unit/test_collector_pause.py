"""full_collections_paused (cluster/runtime/collector_pause.py): the collector's full passes are off while
any replay runs, the thresholds come back when the last one ends, and thresholds something else set
meanwhile stay."""

from __future__ import annotations

import gc
import threading

import pytest

from cluster.runtime.collector_pause import full_collections_paused


@pytest.fixture(autouse=True)
def thresholds_back():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_nested_replays_on_two_threads_bring_them_back_only_when_the_last_ends():
    before = gc.get_threshold()
    first_in, second_done = threading.Event(), threading.Event()
    seen: list[tuple[int, ...]] = []

    def first() -> None:
        with full_collections_paused():
            first_in.set()
            second_done.wait(10)
            seen.append(gc.get_threshold())

    thread = threading.Thread(target=first)
    thread.start()
    assert first_in.wait(10)
    with full_collections_paused():
        paused = gc.get_threshold()
        assert paused[:2] == before[:2] and paused[2] > 1_000_000
    second_done.set()
    thread.join(10)
    assert seen == [paused] and gc.get_threshold() == before and gc.isenabled()


def test_they_come_back_after_a_replay_that_failed():
    before = gc.get_threshold()
    with pytest.raises(ValueError), full_collections_paused():
        raise ValueError
    assert gc.get_threshold() == before


def test_thresholds_set_by_something_else_meanwhile_stay():
    with full_collections_paused():
        gc.set_threshold(500, 5, 5)
    assert gc.get_threshold() == (500, 5, 5)
