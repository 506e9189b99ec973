"""profile-top reads py-spy's raw (collapsed) stacks into self and total time per function."""

from __future__ import annotations

from loadtest.bench.profile import read


def test_self_and_total_time_per_function_and_process_filter(tmp_path):
    raw = tmp_path / "run.txt"
    raw.write_text(
        'process 10:"ray::GroupCoordinatorActor";main (a/b/run.py:3);heartbeat (coordinator/shard.py:40) 6\n'
        'process 10:"ray::GroupCoordinatorActor";main (a/b/run.py:3);heartbeat (coordinator/shard.py:41);pack (x/codec.py:9) 3\n'
        'process 11:"python -m loadtest.bench";drive (loadtest/crowd.py:5) 1\n'
    )
    prof = read(raw)
    assert prof.total == 10
    assert prof.self_time["heartbeat (coordinator/shard.py)"] == 6  # two lines of one function
    assert prof.inclusive["heartbeat (coordinator/shard.py)"] == 9
    assert prof.inclusive["main (b/run.py)"] == 9
    only = read(raw, process="ray::")
    assert only.total == 9 and "drive (loadtest/crowd.py)" not in only.self_time
    through = read(raw, under="shard.py")
    assert through.total == 9 and through.self_time["pack (x/codec.py)"] == 3
