"""SASL on the gateway (issues 10, 21): SCRAM-SHA-256/512 against kafka-python's SCRAM client, PLAIN
against the stored credentials, failures answered with SASL_AUTHENTICATION_FAILED then a close
marked as a failed authentication (the server delays and counts it), the work of an exchange off the
event loop, one frame at a time before authentication, nothing but
ApiVersions/SaslHandshake/SaslAuthenticate before success, the durable store and the
`raygroups user` commands (iterations within Kafka's ScramMechanism bounds)."""

from __future__ import annotations

import asyncio
import inspect
import threading

import pytest
from kafka.net.sasl.scram import ScramClient
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from typer.testing import CliRunner

from cluster.cli import app
from cluster.config import Config
from cluster.gateway.apis import ApiKey
from cluster.gateway.auth.client_listener import client_listener
from cluster.gateway.auth.credentials import CredentialStore, path_in
from cluster.gateway.auth.scram import make_credential
from cluster.gateway.connection import Close, KafkaConnection, Reply
from cluster.gateway.gateway import Gateway
from cluster.gateway.handlers import HANDLERS
from tests.unit.test_connection import frame as flexible_frame


def frame(api_key, version, body):
    """A request framed with the header version its schema names (SaslHandshake is not flexible)."""
    import io
    import struct

    from kio.serial import entity_writer

    header_cls = type(body).__header_schema__
    if header_cls.__name__ == "RequestHeader" and type(body).__flexible__:
        return flexible_frame(api_key, version, body)
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header_cls(request_api_key=api_key, request_api_version=version,
                                                correlation_id=7, client_id="t"))
    entity_writer(type(body))(buf, body)
    return struct.pack(">i", buf.tell()) + buf.getvalue()


@pytest.fixture()
def gateway(tmp_path):
    store = CredentialStore(path_in(tmp_path))
    store.change(upserts=[("alice", make_credential(m, "s3cret")) for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")])
    gw = Gateway.__new__(Gateway)
    gw._handlers = HANDLERS
    gw.super_users = frozenset()
    gw.operator_address = None
    gw.sasl_mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    gw.credentials = store
    return gw


def answer(gw, request):
    """The gateway's answer to request, its handler run to the end on a loop if it is a coroutine."""
    outcome = gw.dispatch(request)
    return asyncio.run(outcome) if inspect.iscoroutine(outcome) else outcome


class Client:
    def __init__(self, gw) -> None:
        self.gw = gw
        self.conn = KafkaConnection(session=client_listener(Config({"listeners": "SASL_PLAINTEXT://h:1"})).new_session())
        self.closed: str | None = None
        self.close: Close | None = None

    def handshake(self, mechanism):
        events = self.conn.receive(frame(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism)))
        (request,) = events
        response = answer(self.gw, request)
        self.conn.respond(request, response)
        self._drain()
        return response

    def authenticate(self, data: bytes):
        (request,) = self.conn.receive(frame(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=data)))
        response = answer(self.gw, request)
        self.conn.respond(request, response)
        self._drain()
        return response

    def _drain(self):
        for event in self.conn.next_events():
            if isinstance(event, Close):
                self.closed, self.close = event.reason, event


METADATA = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_authenticates_a_client_and_proves_the_server(gateway, mechanism):
    client = Client(gateway)
    assert client.handshake(mechanism).error_code == ErrorCode.none
    scram = ScramClient("alice", "s3cret", mechanism)
    first = client.authenticate(scram.first_message())
    assert first.error_code == ErrorCode.none
    scram.process_server_first_message(first.auth_bytes)
    final = client.authenticate(scram.final_message())
    assert final.error_code == ErrorCode.none
    scram.process_server_final_message(final.auth_bytes)  # raises if the server signature is wrong
    assert client.conn.session.principal == "User:alice" and client.closed is None
    (request,) = client.conn.receive(frame(ApiKey.METADATA, 12, METADATA))  # now served
    assert request.api_key == ApiKey.METADATA


@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("mallory", "s3cret")])
def test_a_wrong_scram_password_or_user_is_refused_with_kafkas_error_and_a_close(gateway, user, password):
    client = Client(gateway)
    client.handshake("SCRAM-SHA-256")
    scram = ScramClient(user, password, "SCRAM-SHA-256")
    first = client.authenticate(scram.first_message())
    if first.error_code == ErrorCode.none:
        scram.process_server_first_message(first.auth_bytes)
        answer = client.authenticate(scram.final_message())
    else:
        answer = first
    assert answer.error_code == ErrorCode.sasl_authentication_failed and answer.error_message
    assert client.closed is not None and client.conn.session.principal is None


def test_plain_verifies_against_the_stored_credentials(gateway):
    ok = Client(gateway)
    assert ok.handshake("PLAIN").error_code == ErrorCode.none
    assert ok.authenticate(b"\0alice\0s3cret").error_code == ErrorCode.none
    assert ok.conn.session.principal == "User:alice"
    bad = Client(gateway)
    bad.handshake("PLAIN")
    answer = bad.authenticate(b"\0alice\0nope")
    assert answer.error_code == ErrorCode.sasl_authentication_failed and bad.closed


def test_an_unknown_mechanism_is_refused_with_the_enabled_ones(gateway):
    client = Client(gateway)
    refused = client.handshake("GSSAPI")
    assert refused.error_code == ErrorCode.unsupported_sasl_mechanism
    assert list(refused.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] and client.closed
    assert client.close.authentication_failed  # Kafka's UnsupportedSaslMechanismException: delayed, counted


def counter(name: str) -> float:
    from cluster.metrics.registry import REGISTRY

    return REGISTRY.counters.get((name, ()), 0)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_a_failed_login_is_a_failed_authentication_a_success_is_counted(gateway, mechanism):
    succeeded = counter("successful_authentications")
    bad = Client(gateway)
    bad.handshake(mechanism)
    token = b"\0alice\0nope" if mechanism == "PLAIN" else ScramClient("mallory", "x", mechanism).first_message()
    assert bad.authenticate(token).error_code == ErrorCode.sasl_authentication_failed
    assert bad.close.authentication_failed  # the server delays its answer and close, logs and counts it
    ok = Client(gateway)
    ok.handshake("PLAIN")
    ok.authenticate(b"\0alice\0s3cret")
    assert counter("successful_authentications") == succeeded + 1


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_the_work_of_an_exchange_runs_off_the_event_loop(gateway, mechanism):
    threads: list[int] = []
    lookup = gateway.credentials.lookup

    def recording(user, mech):
        threads.append(threading.get_ident())
        return lookup(user, mech)

    gateway.credentials = type("Recording", (), {"lookup": staticmethod(recording)})()
    client = Client(gateway)
    client.handshake(mechanism)
    token = b"\0alice\0s3cret" if mechanism == "PLAIN" else ScramClient("alice", "s3cret", mechanism).first_message()
    assert client.authenticate(token).error_code == ErrorCode.none
    assert threads and threading.get_ident() not in threads  # PBKDF2 and the store's reads: not the loop's thread


def test_before_authentication_one_frame_is_read_at_a_time():
    """Kafka's SaslServerAuthenticator reads the next frame once the last one is answered: two
    SaslAuthenticate requests of one exchange never run at once."""
    conn = KafkaConnection(session=client_listener(Config({"listeners": "SASL_PLAINTEXT://h:1"})).new_session())
    data = frame(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    data += frame(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0s3cret"))
    (handshake,) = conn.receive(data)
    assert handshake.api_key == ApiKey.SASL_HANDSHAKE and not conn.input_waiting


def test_nothing_but_the_sasl_apis_before_authentication(gateway):
    client = Client(gateway)
    (event,) = client.conn.receive(frame(ApiKey.METADATA, 12, METADATA))
    assert isinstance(event, Close) and "before SASL authentication" in event.reason


def test_authenticate_before_a_handshake_is_an_illegal_state(gateway):
    client = Client(gateway)
    assert client.authenticate(b"x").error_code == ErrorCode.illegal_sasl_state and client.closed


def test_the_store_is_durable_and_salted(tmp_path):
    store = CredentialStore(path_in(tmp_path))
    store.change(upserts=[("bob", make_credential("SCRAM-SHA-512", "pw"))])
    text = path_in(tmp_path).read_text()
    assert "pw\"" not in text and "bob" in text
    again = CredentialStore(path_in(tmp_path))
    assert again.lookup("bob", "SCRAM-SHA-512").verifies("pw")
    assert not again.lookup("bob", "SCRAM-SHA-512").verifies("px")
    store.change(deletions=[("bob", "SCRAM-SHA-512")])
    assert again.lookup("bob", "SCRAM-SHA-512") is None  # re-read on change


def test_user_commands(tmp_path):
    runner = CliRunner()
    added = runner.invoke(app, ["user", "add", "carol", "--data-dir", str(tmp_path), "--password", "pw"])
    assert added.exit_code == 0, added.output
    listed = runner.invoke(app, ["user", "list", "--data-dir", str(tmp_path)])
    assert "carol" in listed.output and "SCRAM-SHA-256" in listed.output and "pw" not in listed.output.replace("SCRAM", "")
    assert CredentialStore(path_in(tmp_path)).lookup("carol", "SCRAM-SHA-256").verifies("pw")
    assert runner.invoke(app, ["user", "delete", "carol", "--data-dir", str(tmp_path)]).exit_code == 0
    assert runner.invoke(app, ["user", "delete", "carol", "--data-dir", str(tmp_path)]).exit_code == 2


@pytest.mark.parametrize("iterations, message", [
    ("200000", "The 'iterations' value must be <= 16384 for SCRAM-SHA-256"),
    ("4095", "The 'iterations' value must be >= 4096 for SCRAM-SHA-256"),
])
def test_user_add_keeps_iterations_within_kafkas_scram_mechanism_bounds(tmp_path, iterations, message):
    runner = CliRunner()
    refused = runner.invoke(app, ["user", "add", "dave", "--data-dir", str(tmp_path), "--password", "pw",
                                  "--iterations", iterations])
    assert refused.exit_code == 2 and message in refused.output
    assert CredentialStore(path_in(tmp_path)).users() == {}
    edge = runner.invoke(app, ["user", "add", "dave", "--data-dir", str(tmp_path), "--password", "pw", "--iterations", "16384"])
    assert edge.exit_code == 0, edge.output
