"""What the invariants need from `run.json`: the groups, the topics, the checked settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtest.experiment import rundir
from loadtest.experiment.rundir import RunDirError

DEFAULT_DELIVERY_COUNT_LIMIT = 5  # Kafka's group.share.delivery.count.limit default
DEFAULT_STABLE_WITHIN_S = 30.0  # the scenario's checks.stable_within_s default
# Classic groups' defaults are the scenario's (GroupSpec), share groups' the cluster's settings'.
CLASSIC_SESSION_TIMEOUT_MS, CLASSIC_HEARTBEAT_MS = 10_000, 3_000
SHARE_HEARTBEAT_MS = 5_000


@dataclass(slots=True)
class RunInfo:
    status: str  # complete, cluster-died, interrupted (or running: the runner never finished)
    classic_groups: dict[str, list[str]]  # group -> topics
    share_groups: dict[str, list[str]]
    partitions: dict[str, int]  # topic -> partition count
    topic_names: dict[str, str]  # topic id -> name (the records files may lack the name)
    delivery_count_limit: int
    stable_within_us: int
    share_auto_offset_reset: str
    # group -> how long after a member starts or stops its group may still rebalance because of it
    churn_reach_us: dict[str, int] = field(default_factory=dict)
    share_churn_reach_us: int = 2 * SHARE_HEARTBEAT_MS * 1000
    offsets_partitions: int = 50  # offsets.topic.num.partitions: where each group's coordinator is

    @property
    def groups(self) -> dict[str, list[str]]:
        return {**self.classic_groups, **self.share_groups}

    def churn_reach(self, group: str) -> int:
        if group in self.share_groups:
            return self.share_churn_reach_us
        return self.churn_reach_us.get(group, (CLASSIC_SESSION_TIMEOUT_MS + CLASSIC_HEARTBEAT_MS) * 1000)


def load_info(run_dir: Path) -> RunInfo:
    raw = rundir.load_run_info(run_dir)
    path = Path(run_dir) / rundir.RUN_JSON
    if not isinstance(raw, dict) or not isinstance(raw.get("groups"), dict):
        raise RunDirError(f"{path}: partial (no `groups`): the runner did not finish writing it")
    try:
        return parse_info(raw)
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise RunDirError(f"{path}: not in the documented format ({type(exc).__name__}: {exc})") from None


def parse_info(raw: dict[str, Any]) -> RunInfo:
    """run.json (as loaded) -> RunInfo; missing settings take their defaults."""
    scenario = raw.get("scenario") or {}
    settings = (raw.get("cluster") or {}).get("settings") or {}
    groups = raw["groups"]
    topics = raw.get("topics") or []
    return RunInfo(
        status=str(raw.get("status", "unknown")),
        classic_groups={g: list(ts) for g, ts in (groups.get("classic") or {}).items()},
        share_groups={g: list(ts) for g, ts in (groups.get("share") or {}).items()},
        partitions={t["name"]: int(t["partitions"]) for t in topics},
        topic_names={str(t["topic_id"]): t["name"] for t in topics if t.get("topic_id")},
        delivery_count_limit=int(settings.get("group.share.delivery.count.limit", DEFAULT_DELIVERY_COUNT_LIMIT)),
        stable_within_us=int(float((scenario.get("checks") or {}).get("stable_within_s", DEFAULT_STABLE_WITHIN_S)) * 1e6),
        share_auto_offset_reset=str(settings.get("share.auto.offset.reset", "latest")),
        churn_reach_us=_churn_reach(scenario),
        share_churn_reach_us=_share_churn_reach(settings),
        offsets_partitions=int(settings.get("offsets.topic.num.partitions", 50)),
    )


def _churn_reach(scenario: dict[str, Any]) -> dict[str, int]:
    """Classic group -> session timeout + heartbeat interval: a member that stops without leaving
    is expired after its session timeout, and the others hear of it at their next heartbeat.
    Groups expand as the scenario names them (name-0, name-1, ... when count > 1)."""
    out = {}
    for spec in scenario.get("groups") or []:
        count = int(spec.get("count", 1))
        names = [spec["name"]] if count == 1 else [f"{spec['name']}-{i}" for i in range(count)]
        reach = (int(spec.get("session_timeout_ms", CLASSIC_SESSION_TIMEOUT_MS))
                 + int(spec.get("heartbeat_interval_ms", CLASSIC_HEARTBEAT_MS)))
        for name in names:
            out[name] = reach * 1000
    return out


def _share_churn_reach(settings: dict[str, Any]) -> int:
    """Two heartbeat intervals: share members are never fenced because others come or go (the
    assignment changes by heartbeat, KIP-932); only a member's own requests in flight around its
    start or stop may be answered UNKNOWN_MEMBER_ID."""
    return 2 * int(settings.get("group.share.heartbeat.interval.ms", SHARE_HEARTBEAT_MS)) * 1000
