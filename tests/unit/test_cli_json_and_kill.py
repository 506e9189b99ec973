"""`status --json` and `actors --json` (the leadership map included), and which actor
`kill --coordinator-of GROUP` / `--leader-of TOPIC-PARTITION` means."""

import json

import pytest
from typer.testing import CliRunner

import cluster.cli as cli
from cluster.cli import app
from cluster.kill_target import KillTargetError, kill_target
from coordinator.hashing import group_partition

STATUS = {
    "version": 3,
    "topics": [
        {"name": "__consumer_offsets", "topic_id": "x", "partitions": 50, "internal": True},
        {"name": "orders", "topic_id": "y", "partitions": 4, "internal": False},
    ],
    "leaders": [{"topic": "__consumer_offsets", "partition": p, "actor": f"group-coordinator-{p % 2}", "epoch": 1}
                for p in range(50)]
    + [{"topic": "orders", "partition": p, "actor": f"partition-leader-{p % 2}", "epoch": 2} for p in range(3)],
    "groups": {"classic": {"Stable": 1}},
    "events": [{"time": 1.0, "kind": "start", "message": "up"}],
}
ACTORS = [
    {"name": "partition-leader-0", "kind": "partition-leader", "node_id": "n1", "alive": True, "partitions": [],
     "share_partitions": [{"group": "g", "topic": "orders", "partition": 0, "start_offset": 0, "end_offset": 5}]},
    {"name": "gateway-0", "kind": "gateway", "node_id": "n1", "alive": True, "address": "127.0.0.1:9092"},
]


@pytest.fixture
def admin(monkeypatch):
    calls = []

    def fake(bootstrap, op, **args):
        calls.append((op, args))
        return {"status": STATUS, "actors": ACTORS, "kill": {"killed": args.get("name")}}[op]

    monkeypatch.setattr(cli, "_admin", fake)
    return calls


def test_status_json_has_the_leadership_map(admin):
    result = CliRunner().invoke(app, ["status", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert {"topic": "orders", "partition": 1, "actor": "partition-leader-1", "epoch": 2} in doc["leaders"]
    assert doc["groups"] == {"classic": {"Stable": 1}}
    assert doc["nodes"] == ["n1"]
    assert doc["share_partitions"][0]["group"] == "g"
    assert [a["name"] for a in doc["actors"]] == ["gateway-0", "partition-leader-0"]


def test_actors_json_has_the_leadership_map(admin):
    result = CliRunner().invoke(app, ["actors", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert {a["name"] for a in doc["actors"]} == {"gateway-0", "partition-leader-0"}
    assert len(doc["leaders"]) == 53


def test_kill_coordinator_of_kills_the_leader_of_the_groups_offsets_partition(admin):
    result = CliRunner().invoke(app, ["kill", "--coordinator-of", "my-group"])
    assert result.exit_code == 0, result.output
    expected = f"group-coordinator-{group_partition('my-group', 50) % 2}"
    assert admin[-1] == ("kill", {"name": expected})


def test_kill_leader_of(admin):
    result = CliRunner().invoke(app, ["kill", "--leader-of", "orders-1"])
    assert result.exit_code == 0, result.output
    assert admin[-1] == ("kill", {"name": "partition-leader-1"})


@pytest.mark.parametrize("args, message", [
    (["kill"], "name one actor"),
    (["kill", "gateway-0", "--leader-of", "orders-1"], "name one actor"),
    (["kill", "--leader-of", "orders"], "expected TOPIC-PARTITION such as orders-3, got 'orders'"),
    (["kill", "--leader-of", "orders-9"], "orders has 4 partitions, no partition 9"),
    (["kill", "--leader-of", "orders-3"], "orders-3 has no leader right now"),
    (["kill", "--leader-of", "nope-0"], "no topic 'nope'"),
])
def test_kill_target_errors_are_one_line(admin, args, message):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert all(op != "kill" for op, _ in admin)


def test_topics_with_dashes():
    status = {"topics": [{"name": "a-b", "partitions": 2}], "leaders": [{"topic": "a-b", "partition": 1, "actor": "pl"}]}
    assert kill_target(status, leader_of="a-b-1") == "pl"
    with pytest.raises(KillTargetError):
        kill_target(status, leader_of="a-b-")


@pytest.mark.parametrize("seconds", ["0", "-1", "nan"])
def test_pause_seconds_out_of_range_is_one_line(admin, seconds):
    result = CliRunner().invoke(app, ["pause", "gateway-0", "--seconds", seconds])
    assert result.exit_code == 2 and "--seconds: must be more than 0" in result.output
    assert admin == []
