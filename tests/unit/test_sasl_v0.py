"""SaslHandshake v0 (issue 10): after the handshake the client sends raw SASL tokens, size-prefixed
without a request header, and gets raw tokens back (Kafka's SaslServerAuthenticator without
SaslAuthenticate headers); a failure closes without an answer; once authenticated, frames are
Kafka requests again."""

from __future__ import annotations

import struct

from kafka.net.sasl.scram import ScramClient
from kio.schema.errors import ErrorCode
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest
from kio.serial import entity_reader

from cluster.gateway.apis import SUPPORTED, ApiKey, response_class
from cluster.gateway.connection import Close, Reply, Request
from tests.unit.test_sasl import METADATA, Client, answer, frame, gateway  # noqa: F401 (a fixture)


class V0Client(Client):
    def send(self, data: bytes) -> list:
        """Feed bytes, run every request through the gateway, return what would be written."""
        out, pending = [], self.conn.receive(data)
        while pending:
            for event in pending:
                if isinstance(event, Close):
                    self.closed = event.reason
                    return out
                self.conn.respond(event, answer(self.gw, event))
            for event in self.conn.next_events():
                if isinstance(event, Reply):
                    out.append(event.data)
                elif isinstance(event, Close):
                    self.closed = event.reason
            pending = self.conn.receive(b"") if self.conn.input_waiting else []
        return out


def raw(token: bytes) -> bytes:
    return struct.pack(">i", len(token)) + token


def handshake_v0(mechanism: str) -> bytes:
    return frame(ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism=mechanism))


def handshake_answer(data: bytes):
    cls = response_class(ApiKey.SASL_HANDSHAKE, 0)
    body = data[4:]
    _header, offset = entity_reader(cls.__header_schema__)(body, 0)
    return entity_reader(cls)(body, offset)[0]


def test_v0_is_advertised():
    assert SUPPORTED[ApiKey.SASL_HANDSHAKE] == (0, 1)


def test_scram_with_raw_tokens_even_sent_with_the_handshake(gateway):
    client = V0Client(gateway)
    scram = ScramClient("alice", "s3cret", "SCRAM-SHA-512")
    answer, first = client.send(handshake_v0("SCRAM-SHA-512") + raw(scram.first_message()))
    assert handshake_answer(answer).error_code == ErrorCode.none
    assert struct.unpack(">i", first[:4])[0] == len(first) - 4  # a bare token: no correlation id
    scram.process_server_first_message(first[4:])
    (final,) = client.send(raw(scram.final_message()))
    scram.process_server_final_message(final[4:])  # raises if the server signature is wrong
    assert client.conn.session.principal == "User:alice" and client.closed is None
    (request,) = client.conn.receive(frame(ApiKey.METADATA, 12, METADATA))  # Kafka requests again
    assert isinstance(request, Request) and request.api_key == ApiKey.METADATA


def test_plain_with_a_raw_token_is_answered_with_an_empty_token(gateway):
    client = V0Client(gateway)
    client.send(handshake_v0("PLAIN"))
    assert client.send(raw(b"\0alice\0s3cret")) == [b"\0\0\0\0"]
    assert client.conn.session.principal == "User:alice"


def test_a_failure_closes_without_an_answer(gateway):
    client = V0Client(gateway)
    client.send(handshake_v0("PLAIN"))
    assert client.send(raw(b"\0alice\0wrong") + frame(ApiKey.METADATA, 12, METADATA)) == [None]
    assert client.closed and client.conn.session.principal is None


def test_a_refused_mechanism_answers_v0_and_closes(gateway):
    client = V0Client(gateway)
    (answer,) = client.send(handshake_v0("GSSAPI"))
    assert handshake_answer(answer).error_code == ErrorCode.unsupported_sasl_mechanism and client.closed


def test_a_v0_handshake_where_nothing_authenticates_is_an_illegal_state(gateway):
    from cluster.gateway.auth.session import Session
    from cluster.gateway.connection import KafkaConnection

    client = V0Client(gateway)
    client.conn = KafkaConnection(session=Session())  # PLAINTEXT: already User:ANONYMOUS
    (answer,) = client.send(handshake_v0("PLAIN") + frame(ApiKey.METADATA, 12, METADATA))
    assert handshake_answer(answer).error_code == ErrorCode.illegal_sasl_state and client.closed


def test_over_a_socket_the_held_input_is_read_once_the_handshake_is_answered(gateway):
    """The asyncio shell feeds the bytes held behind the handshake back in (server.py)."""
    import asyncio

    from cluster.config import Config
    from cluster.gateway.auth.client_listener import client_listener
    from cluster.gateway.server import serve

    async def scenario() -> bytes:
        session = client_listener(Config({"listeners": "SASL_PLAINTEXT://h:1"})).new_session
        server, _stats = await serve(gateway.dispatch, "127.0.0.1", 0, 1 << 20, new_session=session)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(handshake_v0("PLAIN") + raw(b"\0alice\0s3cret"))
        await writer.drain()
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        handshake = await reader.readexactly(size)
        token = await reader.readexactly(4)
        writer.close()
        server.close()
        return handshake, token

    handshake, token = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert handshake_answer(struct.pack(">i", len(handshake)) + handshake).error_code == ErrorCode.none
    assert token == b"\0\0\0\0"
