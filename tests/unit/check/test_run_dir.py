"""Run directories the checker cannot judge (a clear RunDirError), runs cut short (n/a, not a
crash), optional records missing (a fallback), and `verdicts.json` as documented."""

from __future__ import annotations

import datetime
import json

import pyarrow.parquet as pq
import pytest

from loadtest.check import run_check
from loadtest.experiment import rundir
from loadtest.experiment.eventlog import SCHEMA
from loadtest.experiment.rundir import RunDirError
from tests.unit.check.runbuilder import CLASSIC, RECORDS, judge, produced_at


@pytest.fixture
def run_dir(builder, tmp_path):
    return builder.write(tmp_path / "run")


def test_a_missing_run_directory_says_so(tmp_path):
    with pytest.raises(RunDirError, match="no such run directory"):
        run_check(tmp_path / "nowhere")


def test_a_run_directory_without_run_json_names_it(run_dir):
    (run_dir / rundir.RUN_JSON).unlink()
    with pytest.raises(RunDirError, match="missing run.json"):
        run_check(run_dir)


def test_an_unreadable_run_json_says_so(run_dir):
    (run_dir / rundir.RUN_JSON).write_text('{"format": 1, "groups": {')
    with pytest.raises(RunDirError, match="run.json: unreadable"):
        run_check(run_dir)


def test_a_run_json_the_runner_did_not_finish_says_so(run_dir):
    (run_dir / rundir.RUN_JSON).write_text(json.dumps({"format": 1, "status": "running"}))
    with pytest.raises(RunDirError, match="run.json: partial"):
        run_check(run_dir)


def test_a_run_without_an_event_log_names_it(run_dir):
    for part in (run_dir / rundir.EVENTS).iterdir():
        part.unlink()
    with pytest.raises(RunDirError, match=r"missing events/part-\*\.parquet"):
        run_check(run_dir)


def test_an_event_log_without_events_says_so(run_dir):
    for part in (run_dir / rundir.EVENTS).iterdir():
        part.unlink()
    pq.write_table(SCHEMA.empty_table(), run_dir / rundir.EVENTS / "part-00000.parquet")
    with pytest.raises(RunDirError, match="holds no events"):
        run_check(run_dir)


def test_a_corrupt_event_log_part_says_so(run_dir):
    (run_dir / rundir.EVENTS / "part-00001.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(RunDirError, match="event log is unreadable"):
        run_check(run_dir)


def test_missing_records_files_are_not_errors(builder, tmp_path):
    builder.share_state = None
    builder.share_final = None
    result = judge(builder, tmp_path)
    assert result.ok, {v.name: v.summary for v in result.verdicts}
    assert sorted(result.notes) == ["records/share_group_state.parquet missing",
                                    "records/share_state_final.parquet missing"]
    assert "clients' acknowledgements" in result.verdict("unfinished-share-record").summary


def test_a_run_whose_cluster_died_before_the_drain_gets_n_a_where_nothing_can_be_judged(builder, tmp_path):
    builder.info["status"] = "cluster-died"
    builder.remove(lambda r: r["kind"] in ("drained", "end_offset") or (r["kind"] == "phase" and r["state"] != "start"
                                                                        and r["state"] != "load"))
    result = judge(builder, tmp_path)
    found = {v.name: v for v in result.verdicts}
    for name in ("lost-write", "incomplete-read", "unfinished-share-record"):
        assert found[name].status == "n/a", found[name].summary
        assert "cluster-died" in found[name].summary
    assert {v.status for n, v in found.items() if n not in ("lost-write", "incomplete-read",
                                                             "unfinished-share-record")} == {"pass"}
    assert result.ok


def test_a_run_without_share_groups_says_n_a_for_the_share_invariants(builder, tmp_path):
    builder.info["groups"]["share"] = {}
    builder.remove(lambda r: r.get("role") == "share" or r["kind"] == "ack")
    found = {v.name: v for v in judge(builder, tmp_path).verdicts}
    for name in ("duplicate-share", "double-acquisition", "delivery-count-exceeded", "unfinished-share-record"):
        assert found[name].status == "n/a", found[name].summary
    assert found["lost-write"].status == "pass" and found["lost-write"].checked == RECORDS * 2 * 2  # classic, consumer


def test_verdicts_json_is_written_as_documented(builder, tmp_path):
    builder.remove(lambda r: r["kind"] == "delivery" and r["group"] == CLASSIC and r["partition"] == 0)
    result = judge(builder, tmp_path)
    data = json.loads((tmp_path / "run" / rundir.VERDICTS).read_text())
    assert set(data) == {"format", "ok", "checked_at", "verdicts"}
    assert (data["format"], data["ok"]) == (1, False)
    datetime.datetime.fromisoformat(data["checked_at"])
    assert [v["name"] for v in data["verdicts"]] == [v.name for v in result.verdicts]
    for v in data["verdicts"]:
        assert set(v) == {"name", "title", "status", "summary", "checked", "violations", "evidence"}
        assert v["status"] in ("pass", "fail", "n/a")
    lost = data["verdicts"][0]
    assert (lost["name"], lost["status"], lost["violations"]) == ("lost-write", "fail", RECORDS)
    first = lost["evidence"][0]
    assert first["time"] == datetime.datetime.fromtimestamp(1_795_000_000 + produced_at(0, 0), datetime.UTC).isoformat()
    assert first["request_time"].endswith("+00:00") and first["kind"] == "produce"


def test_evidence_stops_at_50_rows_while_the_count_goes_on(builder, tmp_path):
    builder.remove(lambda r: r["kind"] == "delivery" and r["group"] == CLASSIC)
    for p in range(2):
        for offset in range(RECORDS, 40):  # 26 more records in each partition, never consumed
            builder.produce(p, offset, 43.0)
    for row in builder.find(kind="end_offset"):
        row["offset"] = 40
    result = judge(builder, tmp_path)
    lost = result.verdict("lost-write")
    assert lost.violations == 80 + 52 + 52  # billing-0 lost all 80; workers and ledger-0 the 52 new ones
    assert len(lost.evidence) == 50
    data = json.loads((tmp_path / "run" / rundir.VERDICTS).read_text())
    assert all(len(v["evidence"]) <= 50 for v in data["verdicts"])


def test_a_run_without_faults_says_n_a_for_the_fault_invariants(builder, tmp_path):
    builder.remove(lambda r: r["kind"] in ("fault", "fault_end", "recovery"))
    found = {v.name: v for v in judge(builder, tmp_path).verdicts}
    assert (found["unstable-group"].status, found["unstable-group"].summary) == ("n/a", "no fault was injected")
    assert found["failover-rebalance"].status == "n/a"
    assert {v.status for n, v in found.items() if n not in ("unstable-group", "failover-rebalance")} == {"pass"}
