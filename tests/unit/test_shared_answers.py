"""Only answers a handler declares shared are encoded once; every other answer is encoded as sent."""

from kio.schema.errors import ErrorCode

import cluster.gateway.connection as connection
from cluster.gateway.apis import ApiKey
from cluster.gateway.answers import build_response
from cluster.gateway.connection import Request, encode_response, shared_answer
from cluster.gateway.handlers.groups import _heartbeat_response


def _request(correlation_id: int, version: int = 4) -> Request:
    return Request(ApiKey.HEARTBEAT, version, correlation_id, "c", None, 0)


def test_a_shared_answer_is_encoded_once_and_framed_per_request(monkeypatch) -> None:
    answer = _heartbeat_response(4, ErrorCode.rebalance_in_progress)
    assert _heartbeat_response(4, ErrorCode.rebalance_in_progress) is answer
    writes = []
    real = connection.encode_entity
    monkeypatch.setattr(connection, "encode_entity", lambda entity: writes.append(entity) or real(entity))
    # Many one-off small answers in between do not push the shared one out.
    for i in range(1_000):
        encode_response(_request(i), build_response(ApiKey.HEARTBEAT, 4, {"error_code": ErrorCode.none}))
    assert len(writes) == 1_000
    first, second = encode_response(_request(7), answer), encode_response(_request(8), answer)
    assert len(writes) == 1_000
    assert first[:4] == second[:4] and first[4:8] == (7).to_bytes(4, "big") and second[4:8] == (8).to_bytes(4, "big")
    assert first[8:] == second[8:]


def test_a_shared_answer_encodes_as_a_fresh_one() -> None:
    fresh = build_response(ApiKey.HEARTBEAT, 2, {"error_code": ErrorCode.unknown_member_id})
    shared = shared_answer(build_response(ApiKey.HEARTBEAT, 2, {"error_code": ErrorCode.unknown_member_id}))
    assert encode_response(_request(1, 2), shared) == encode_response(_request(1, 2), fresh)
