"""What the invariants need from `run.json`: the groups, the topics, the checked settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtest.experiment import rundir
from loadtest.experiment.rundir import RunDirError

DEFAULT_DELIVERY_COUNT_LIMIT = 5  # Kafka's group.share.delivery.count.limit default
DEFAULT_STABLE_WITHIN_S = 30.0  # the scenario's checks.stable_within_s default
# Classic groups' defaults are the scenario's (GroupSpec), share and consumer groups' the cluster's settings'.
CLASSIC_SESSION_TIMEOUT_MS, CLASSIC_HEARTBEAT_MS = 10_000, 3_000
REBALANCE_TIMEOUT_MS = 30_000  # the scenario's GroupSpec default
SHARE_HEARTBEAT_MS = 5_000
CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_MS = 45_000, 5_000  # group.consumer.* (KIP-848)


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
    # Groups of KIP-848's consumer protocol (run.json's groups.consumer; none in older runs), and
    # the timeouts after which their coordinator removes a member: its session timeout (the
    # cluster's group.consumer.session.timeout.ms) and, while it is asked to revoke, its rebalance
    # timeout (the scenario's, per group).
    consumer_groups: dict[str, list[str]] = field(default_factory=dict)
    consumer_session_timeout_us: int = CONSUMER_SESSION_TIMEOUT_MS * 1000
    consumer_churn_reach_us: int = 2 * CONSUMER_HEARTBEAT_MS * 1000
    rebalance_timeout_us: dict[str, int] = field(default_factory=dict)

    @property
    def groups(self) -> dict[str, list[str]]:
        return {**self.classic_groups, **self.consumer_groups, **self.share_groups}

    def churn_reach(self, group: str) -> int:
        if group in self.share_groups:
            return self.share_churn_reach_us
        if group in self.consumer_groups:
            return self.consumer_churn_reach_us
        return self.churn_reach_us.get(group, (CLASSIC_SESSION_TIMEOUT_MS + CLASSIC_HEARTBEAT_MS) * 1000)

    def rebalance_timeout(self, group: str) -> int:
        return self.rebalance_timeout_us.get(group, REBALANCE_TIMEOUT_MS * 1000)


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
        consumer_groups={g: list(ts) for g, ts in (groups.get("consumer") or {}).items()},
        consumer_session_timeout_us=_ms(settings, "group.consumer.session.timeout.ms", CONSUMER_SESSION_TIMEOUT_MS),
        consumer_churn_reach_us=2 * _ms(settings, "group.consumer.heartbeat.interval.ms", CONSUMER_HEARTBEAT_MS),
        rebalance_timeout_us=_per_group(scenario, "rebalance_timeout_ms", REBALANCE_TIMEOUT_MS),
    )


def _churn_reach(scenario: dict[str, Any]) -> dict[str, int]:
    """Classic group -> session timeout + heartbeat interval: a member that stops without leaving
    is expired after its session timeout, and the others hear of it at their next heartbeat.
    Groups expand as the scenario names them (name-0, name-1, ... when count > 1)."""
    out = {}
    for spec in scenario.get("groups") or []:
        reach = (int(spec.get("session_timeout_ms", CLASSIC_SESSION_TIMEOUT_MS))
                 + int(spec.get("heartbeat_interval_ms", CLASSIC_HEARTBEAT_MS)))
        for name in _names(spec):
            out[name] = reach * 1000
    return out


def _ms(settings: dict[str, Any], name: str, default_ms: int) -> int:
    """A cluster setting in milliseconds, as microseconds."""
    return int(settings.get(name, default_ms)) * 1000


def _per_group(scenario: dict[str, Any], key: str, default_ms: int) -> dict[str, int]:
    """Group -> a [[groups]] setting in microseconds."""
    return {name: int(spec.get(key, default_ms)) * 1000 for spec in scenario.get("groups") or [] for name in _names(spec)}


def _names(spec: dict[str, Any]) -> list[str]:
    count = int(spec.get("count", 1))
    return [spec["name"]] if count == 1 else [f"{spec['name']}-{i}" for i in range(count)]


def _share_churn_reach(settings: dict[str, Any]) -> int:
    """Two heartbeat intervals: share members are never fenced because others come or go (the
    assignment changes by heartbeat, KIP-932); only a member's own requests in flight around its
    start or stop may be answered UNKNOWN_MEMBER_ID."""
    return 2 * int(settings.get("group.share.heartbeat.interval.ms", SHARE_HEARTBEAT_MS)) * 1000
