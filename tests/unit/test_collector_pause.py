"""collector_paused (cluster/runtime/collector_pause.py): automatic garbage collection is off while any
replay runs, on again when the last one ends, and left off in a process that turned it off itself."""

from __future__ import annotations

import gc
import threading

import pytest

from cluster.runtime.collector_pause import collector_paused


@pytest.fixture(autouse=True)
def collector_back_on():
    yield
    gc.enable()


def test_nested_replays_on_two_threads_bring_it_back_only_when_the_last_ends():
    first_in, second_done = threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_done.wait(10)
            seen.append(gc.isenabled())

    thread = threading.Thread(target=first)
    thread.start()
    assert first_in.wait(10)
    with collector_paused():
        assert not gc.isenabled()
    second_done.set()
    thread.join(10)
    assert seen == [False] and gc.isenabled()


def test_it_comes_back_after_a_replay_that_failed():
    with pytest.raises(ValueError), collector_paused():
        raise ValueError
    assert gc.isenabled()


def test_a_process_that_turned_it_off_keeps_it_off():
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()
