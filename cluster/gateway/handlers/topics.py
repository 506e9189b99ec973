"""CreateTopics, DeleteTopics, CreatePartitions: forwarded to the controller, which owns topics.

A metadata write that fails (a full disk) answers UNKNOWN_SERVER_ERROR per topic, as Kafka's
controller answers a failure it did not expect; the controller's metadata is as before it, so the
client may retry. A controller that does not answer is REQUEST_TIMED_OUT per topic. Neither has a
message (cluster/clients/controller.py says why).

A partition count beyond raygroups.max.partitions.per.topic or raygroups.max.partitions is
answered here, at once, against this gateway's view of the topics: such a request never reaches
the controller, which would otherwise make a record and a placement per partition asked for.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from cluster.clients.controller import ControllerFailed
from cluster.gateway.apis import ApiKey
from cluster.gateway.answers import build_response
from cluster.gateway.connection import Request
from cluster.gateway.context import GatewayContext
from cluster.gateway.handlers.common import kafka_message
from cluster.metadata import PartitionBudget, PartitionLimits, TopicOutcome, TopicSpec, validate_topic_name


async def create_topics(gw: GatewayContext, request: Request) -> Any:
    body = request.body
    specs = []
    for t in body.topics:
        partitions = t.num_partitions if t.num_partitions != -1 else gw.config["num.partitions"]
        if t.assignments:
            # Manual replica assignment names brokers; raygroups places partitions on actors itself.
            partitions = len(t.assignments)
        configs = {c.name: c.value for c in t.configs if c.value is not None}
        specs.append(TopicSpec(t.name, partitions, t.replication_factor, configs))
    refused = over_partition_limits(gw, specs)
    forwarded = [spec for i, spec in enumerate(specs) if i not in refused]
    answered: Any = ()
    if forwarded:
        try:
            answered = await gw.controller.create_topics(forwarded, bool(getattr(body, "validate_only", False)))
        except ControllerFailed as exc:
            answered = [_failed(spec.name, exc) for spec in forwarded]
    answered = iter(answered)
    outcomes = [refused[i] if i in refused else next(answered) for i in range(len(specs))]
    await gw.router.refresh()
    return build_response(
        ApiKey.CREATE_TOPICS,
        request.api_version,
        {
            "topics": [
                {
                    "name": o.name,
                    "topic_id": o.topic_id,
                    "error_code": o.error_code,
                    "error_message": kafka_message(o.error_code, o.message),
                    "num_partitions": o.partitions,
                    "replication_factor": o.replication_factor if o.error_code == ErrorCode.none else -1,
                    "configs": None,
                }
                for o in outcomes
            ]
        },
    )


async def delete_topics(gw: GatewayContext, request: Request) -> Any:
    body = request.body
    if request.api_version >= 6:
        names: list[str | None] = []
        for t in body.topics:
            if t.name is not None:
                names.append(t.name)
            else:
                info = gw.leadership.topics_by_id.get(t.topic_id)
                names.append(info.name if info else None)
        topic_ids = [t.topic_id for t in body.topics]
    else:
        names = list(body.topic_names)
        topic_ids = [None] * len(names)
    known = [n for n in names if n is not None]
    outcomes: dict[str, TopicOutcome] = {}
    if known:
        try:
            outcomes = {o.name: o for o in await gw.controller.delete_topics(known)}
        except ControllerFailed as exc:
            outcomes = {n: _failed(n, exc) for n in known}
    await gw.router.refresh()
    responses = []
    for name, topic_id in zip(names, topic_ids):
        if name is None:
            responses.append(
                {"name": None, "topic_id": topic_id, "error_code": ErrorCode.unknown_topic_id, "error_message": "unknown topic id"}
            )
            continue
        o = outcomes[name]
        responses.append(
            {"name": name, "topic_id": o.topic_id or topic_id, "error_code": o.error_code,
             "error_message": kafka_message(o.error_code, o.message)}
        )
    return build_response(ApiKey.DELETE_TOPICS, request.api_version, {"responses": responses})


async def create_partitions(gw: GatewayContext, request: Request) -> Any:
    body = request.body
    results = []
    budget = _budget(gw)
    for t in body.topics:
        info = gw.leadership.topics.get(t.name)
        problem = None
        if info is not None and t.count > info.partitions:
            problem = budget.take(t.name, t.count, t.count - info.partitions)
        if problem:
            o = TopicOutcome(t.name, ErrorCode.policy_violation, problem)
        else:
            try:
                o = await gw.controller.create_partitions(t.name, t.count, bool(body.validate_only))
            except ControllerFailed as exc:
                o = _failed(t.name, exc)
        results.append(
            {"name": t.name, "error_code": o.error_code, "error_message": kafka_message(o.error_code, o.message)}
        )
    await gw.router.refresh()
    return build_response(ApiKey.CREATE_PARTITIONS, request.api_version, {"results": results})


def _budget(gw: GatewayContext) -> PartitionBudget:
    topics = gw.leadership.topics.values()
    return PartitionBudget(PartitionLimits.from_config(gw.config), sum(t.partitions for t in topics))


def over_partition_limits(gw: GatewayContext, specs: list[TopicSpec]) -> dict[int, TopicOutcome]:
    """Index -> POLICY_VIOLATION for the specs whose partitions would pass a limit. Specs the
    controller refuses for another reason (bad name, non-positive count) are left to it."""
    budget = _budget(gw)
    refused: dict[int, TopicOutcome] = {}
    for i, spec in enumerate(specs):
        if spec.partitions <= 0 or validate_topic_name(spec.name) or spec.name in gw.leadership.topics:
            continue
        problem = budget.take(spec.name, spec.partitions, spec.partitions)
        if problem:
            refused[i] = TopicOutcome(spec.name, ErrorCode.policy_violation, problem)
    return refused


def _failed(name: str, exc: ControllerFailed) -> TopicOutcome:
    return TopicOutcome(name, exc.error_code, None)
