"""loadtest/scenarios/protocols.toml end to end, shortened: classic groups and their KIP-848
consumer-protocol twins on the same topics, under the demo's faults plus a kill of a consumer
group's coordinator. Every verdict passes, double-ownership among them; and a double ownership
planted into a copy of the run's own assignment rows is caught (the checker's unit tests plant
one in a synthetic run; this one is in what real members reported)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from loadtest.check import INVARIANTS, check_run, load_run
from loadtest.experiment.eventlog import read_events, rows_to_table

pytestmark = pytest.mark.slow

RAYGROUPS = str(Path(sys.executable).with_name("raygroups"))
SCENARIO = Path(__file__).parents[2] / "loadtest" / "scenarios" / "protocols.toml"
DURATION_S = 30  # of the scenario's 90: its faults keep their places, scaled


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("protocols") / "run"
    done = subprocess.run([RAYGROUPS, "experiment", str(SCENARIO), "--duration", str(DURATION_S), "--out", str(out),
                           "--no-report"], capture_output=True, text=True, timeout=900)
    return out, done


def _verdicts(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in json.loads((run_dir / "verdicts.json").read_text())["verdicts"]}


def test_both_protocols_pass_every_verdict_under_the_faults(run):
    out, done = run
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "complete"
    assert set(info["groups"]["consumer"]) >= {"ledger-0", "settle-0", "analytics-0"}
    assert set(info["groups"]["classic"]) >= {"billing-0", "audit-0", "reporting-0"}
    assert len(info["faults"]) == 6  # the demo's five and the kill of ledger-0's coordinator
    verdicts = _verdicts(out)
    assert len(verdicts) == len(INVARIANTS)
    assert {name: v["status"] for name, v in verdicts.items() if v["status"] != "pass"} == {}
    owned = verdicts["double-ownership"]
    assert owned["checked"] > 0 and "handover" in owned["summary"], owned["summary"]


def test_a_double_ownership_planted_in_the_runs_own_assignment_rows_is_caught(run, tmp_path):
    out, done = run
    assert done.returncode == 0, done.stdout[-4000:]
    copy = tmp_path / "planted"
    copy.mkdir()
    for name in ("run.json", "scenario.toml", "leadership.parquet"):
        if (out / name).exists():
            shutil.copy2(out / name, copy / name)
    shutil.copytree(out / "events", copy / "events")
    shutil.copytree(out / "records", copy / "records")

    planted = _plant(out)
    pq.write_table(rows_to_table([planted]), copy / "events" / "part-99999.parquet")

    result = check_run(load_run(copy))
    verdicts = {v.name: v for v in result.verdicts}
    owned = verdicts["double-ownership"]
    assert owned.status == "fail" and owned.violations >= 1, owned.summary
    topic, partition = next(iter(planted["detail"]["assigned"].items()))
    claimed = f"{topic}-{partition[0]} of {planted['group']} given to {planted['member']}"
    assert any(claimed in (e.get("why") or "") for e in owned.evidence), owned.evidence[:3]
    # Only that verdict changes: the planted row is no delivery, commit or rebalance.
    before = _verdicts(out)
    assert {n: v.status for n, v in verdicts.items() if n != "double-ownership"} == \
        {n: v["status"] for n, v in before.items() if n != "double-ownership"}


def _plant(run_dir: Path) -> dict[str, Any]:
    """A row in which another member of a consumer group claims a partition in the middle of a real
    owner's span that ended in a clean revocation (so no loss can excuse the overlap): the other
    member's own last assignment then, plus that partition."""
    rows = [r for r in read_events(run_dir).to_pylist() if r["kind"] == "assignment" and r["role"] == "consumer"]
    for r in rows:
        r["detail"] = json.loads(r["detail"])
        r["ms"] = _ms(r["time"])
    rows.sort(key=lambda r: r["ms"])
    members: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        members.setdefault(r["member"], []).append(r)
    for member, mine in members.items():
        for i, start in enumerate(mine):
            for topic, partitions in (start["detail"].get("assigned") or {}).items():
                for p in partitions:
                    end = next((r for r in mine[i + 1:] if p not in r["detail"]["assignment"].get(topic, [])), None)
                    if end is None or end["detail"]["reason"] != "revoked" or end["ms"] - start["ms"] < 4:
                        continue
                    others = [m for m, theirs in members.items() if m != member and theirs[0]["group"] == start["group"]]
                    if not others:
                        continue
                    claimer, middle = others[0], (start["ms"] + end["ms"]) / 2
                    before = [r for r in members[claimer] if r["ms"] < middle]
                    owned = {t: list(ps) for t, ps in (before[-1]["detail"]["assignment"] if before else {}).items()}
                    owned[topic] = sorted({*owned.get(topic, []), p})
                    return {"time": middle, "kind": "assignment", "role": "consumer", "member": claimer,
                            "member_id": members[claimer][0]["member_id"], "group": start["group"],
                            "generation": before[-1]["generation"] if before else 1,
                            "detail": {"assignment": owned, "reason": "assigned", "assigned": {topic: [p]}}}
    raise AssertionError("no clean handover in the run's consumer groups to plant a double ownership into")


def _ms(t: datetime) -> float:
    return t.timestamp() * 1000
