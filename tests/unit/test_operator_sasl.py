"""admin_call over SASL (issue 10): a super user operates over a client listener, PLAIN or SCRAM, in
TLS or not; anyone else is refused before the operator API runs; a wrong password never reaches it."""

from __future__ import annotations

import asyncio
import threading

import msgpack
import pytest

from cluster.admin_client import AdminError, Security, admin_call
from cluster.config import Config
from cluster.gateway.apis import ADMIN_API_KEY
from cluster.gateway.auth.client_listener import client_listener
from cluster.gateway.auth.credentials import CredentialStore, path_in
from cluster.gateway.auth.scram import make_credential
from cluster.gateway.gateway import Gateway
from cluster.gateway.handlers import HANDLERS
from cluster.gateway.server import serve
from tests.certs import write_keystore_and_ca


class Listener:
    """A gateway serving one SASL client listener on a loop in a thread; its operator API records."""

    def __init__(self, tmp_path, tls: bool) -> None:
        store = CredentialStore(path_in(tmp_path))
        for name in ("admin", "alice"):
            store.change(upserts=[(name, make_credential(m, f"{name}-pw")) for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")])
        self.calls: list[dict] = []
        gw = Gateway.__new__(Gateway)
        gw._handlers = {**HANDLERS, ADMIN_API_KEY: self._operate}
        gw.super_users = frozenset({"User:admin"})
        gw.operator_address = None
        gw.sasl_mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        gw.credentials = store
        settings = {"listeners": ("SASL_SSL" if tls else "SASL_PLAINTEXT") + "://127.0.0.1:0"}
        self.ca_file = None
        if tls:
            keystore, ca_file = write_keystore_and_ca(tmp_path, "127.0.0.1")
            self.ca_file = str(ca_file)
            settings["ssl.keystore.location"] = str(keystore)
        self.listener = client_listener(Config(settings))
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.server, _ = self.loop.run_until_complete(
                serve(gw.dispatch, "127.0.0.1", 0, 1 << 20, new_session=self.listener.new_session, ssl=self.listener.ssl))
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        ready.wait(10)
        self.address = f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    def _operate(self, gw, request) -> bytes:
        self.calls.append({"principal": request.session.principal, **msgpack.unpackb(request.body)})
        return msgpack.packb({"ok": True, "result": "done"})

    def security(self, user: str, mechanism: str, password: str | None = None) -> Security:
        return Security(self.listener.protocol.value, mechanism, user, password or f"{user}-pw", self.ca_file)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(params=[False, True], ids=["sasl_plaintext", "sasl_ssl"])
def listener(tmp_path, request):
    served = Listener(tmp_path, request.param)
    yield served
    served.stop()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_super_user_operates_over_sasl(listener, mechanism):
    assert admin_call(listener.address, "kill", security=listener.security("admin", mechanism), name="x") == "done"
    assert listener.calls == [{"principal": "User:admin", "op": "kill", "args": {"name": "x"}}]


def test_another_user_is_refused_and_nothing_runs(listener):
    with pytest.raises(AdminError, match="operator listener or to a super user"):
        admin_call(listener.address, "kill", follow=False, security=listener.security("alice", "SCRAM-SHA-256"), name="x")
    assert listener.calls == []


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_fails_authentication(listener, mechanism):
    with pytest.raises(AdminError, match="SASL authentication failed"):
        admin_call(listener.address, "kill", security=listener.security("admin", mechanism, "nope"), name="x")
    assert listener.calls == []


def without_credentials(listener, security: Security | None) -> str:
    """What the CLI says when the gateway closes its operator request unanswered (issue 21)."""
    with pytest.raises(AdminError) as refused:
        admin_call(listener.address, "kill", follow=False, security=security, name="x")
    assert listener.calls == []
    return str(refused.value)


def test_without_credentials_the_cli_says_the_listener_needs_them_and_where_the_operator_listener_is(listener):
    protocol = listener.listener.protocol.value  # SASL_PLAINTEXT or SASL_SSL
    given = [None] if listener.ca_file is None else [None, Security("SSL", ca_file=listener.ca_file)]
    for security in given:  # over TLS: whether or not the caller speaks TLS
        message = without_credentials(listener, security)
        assert "cannot reach" not in message
        assert f"{listener.address} is a {protocol} listener (SASL PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)" in message
        assert f"RAYGROUPS_SECURITY_PROTOCOL={protocol}" in message
        assert "RAYGROUPS_SASL_USERNAME" in message and "RAYGROUPS_SASL_PASSWORD" in message
        assert ("RAYGROUPS_SSL_CA_LOCATION" in message) == (listener.ca_file is not None)
        assert "operator listener" in message and "raygroups.operator.port" in message
        assert "operator API at" in message  # what `raygroups up` prints
        assert "\n" not in message


def test_a_cli_without_credentials_exits_2_with_that_line(listener, monkeypatch):
    from typer.testing import CliRunner

    from cluster.cli import app

    for name in ("RAYGROUPS_SECURITY_PROTOCOL", "RAYGROUPS_SASL_USERNAME", "RAYGROUPS_SASL_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(app, ["kill", "x", "--bootstrap", listener.address])
    assert result.exit_code == 2
    assert "need a super user's credentials" in " ".join(result.output.split())
    assert listener.calls == []
