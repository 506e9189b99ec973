"""InitProducerId (API key 22): producer ids for idempotent producers.

Kafka's answers (KafkaApis.handleInitProducerIdRequest, TransactionCoordinator.handleInitProducerId):
- producer_id and producer_epoch (v3+) must both be -1 or both be set: otherwise INVALID_REQUEST;
- transactional_id null: a new producer id at epoch 0, whatever producer_id/epoch the request
  carries. An idempotent producer asking for a KIP-360 epoch bump therefore gets a fresh id, as
  from Kafka, and starts every partition's sequence at 0 again; the epoch bump that keeps the
  producer id exists only for transactional ids, whose epochs the transaction coordinator stores;
- transactional_id "": INVALID_REQUEST;
- any other transactional_id: UNSUPPORTED_VERSION, because transactions are not offered (SPEC.md
  §11). It is Kafka's answer to a request for a feature the cluster has switched off (e.g. a
  ConsumerGroupHeartbeat while `group.coordinator.rebalance.protocols` excludes `consumer`:
  ConsumerGroupHeartbeatRequestTest), and clients treat it as fatal, where a coordinator error
  (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) would make them retry forever.
Errors carry producer id -1 and epoch -1, as Kafka's initTransactionError does. When the gateway's
block of ids is used up and the controller cannot hand out the next one, the answer is the
retriable COORDINATOR_LOAD_IN_PROGRESS, which Kafka's RPCProducerIdManager gives in that case.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.gateway.answers import build_response
from cluster.gateway.connection import Request
from cluster.gateway.context import GatewayContext
from cluster.gateway.producer_ids import NoProducerIdBlock

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


async def init_producer_id(gw: GatewayContext, request: Request) -> Any:
    body = request.body
    producer_id = getattr(body, "producer_id", NO_PRODUCER_ID)  # v3+
    producer_epoch = getattr(body, "producer_epoch", NO_PRODUCER_EPOCH)
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return _answer(request, ErrorCode.invalid_request)
    transactional_id = body.transactional_id
    if transactional_id == "":
        return _answer(request, ErrorCode.invalid_request)
    if transactional_id is not None:
        return _answer(request, ErrorCode.unsupported_version)
    try:
        new_id = await gw.producer_ids.next_id()
    except NoProducerIdBlock:
        return _answer(request, ErrorCode.coordinator_load_in_progress)
    return _answer(request, ErrorCode.none, new_id, 0)


def _answer(
    request: Request, error: ErrorCode, producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH
) -> Any:
    return build_response(
        ApiKey.INIT_PRODUCER_ID,
        request.api_version,
        {"throttle_time": 0, "error_code": error, "producer_id": producer_id, "producer_epoch": producer_epoch},
    )
