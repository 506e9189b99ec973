"""Listeners and TLS (issue 10): Kafka's listener syntax and protocol map, PEM key material with
Kafka's names (a keystore file, inline chain and key, an encrypted key), and a TLS gateway socket
serving a request."""

from __future__ import annotations

import asyncio
import ssl

import msgpack
import pytest
import trustme

from cluster.config import Config
from cluster.gateway.auth.client_listener import client_listener
from cluster.gateway.auth.listeners import SecurityProtocol, parse_listener
from cluster.gateway.auth.session import ListenerKind, Session
from cluster.gateway.auth.tls import TlsConfigError, server_context
from cluster.gateway.server import serve
from tests.unit.test_operator_access import admin_frame

MAP = Config()["listener.security.protocol.map"]


def test_listener_syntax_and_the_protocol_map():
    assert parse_listener("", MAP) is None
    assert parse_listener("SASL_SSL://127.0.0.1:9093", MAP).protocol is SecurityProtocol.SASL_SSL
    custom = parse_listener("CLIENT://:9094", "CLIENT:SASL_PLAINTEXT")
    assert (custom.name, custom.protocol, custom.host, custom.port) == ("CLIENT", SecurityProtocol.SASL_PLAINTEXT, "", 9094)
    for bad, message in [("PLAINTEXT://a:1,SSL://a:2", "one client listener"), ("PLAINTEXT:9092", "NAME://host:port"),
                         ("OTHER://a:1", "not in listener.security.protocol.map")]:
        with pytest.raises(ValueError, match=message):
            parse_listener(bad, MAP)
    with pytest.raises(ValueError, match="NAME:PROTOCOL"):
        parse_listener("A://h:1", "A:KERBEROS")


def test_a_sasl_listener_starts_unauthenticated_and_plaintext_as_anonymous():
    assert client_listener(Config({"listeners": "SASL_PLAINTEXT://h:1"})).new_session().principal is None
    assert client_listener(Config()).new_session().authenticated


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


def tls_config(ca, tmp_path, inline: bool = False, password: bytes | None = None) -> Config:
    cert = ca.issue_cert("127.0.0.1", "localhost")
    key_pem = cert.private_key_pem.bytes()
    if password is not None:
        from cryptography.hazmat.primitives import serialization

        key = serialization.load_pem_private_key(key_pem, None)
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.BestAvailableEncryption(password))
    chain = b"".join(blob.bytes() for blob in cert.cert_chain_pems)
    values = {"listeners": "SSL://127.0.0.1:0"}
    if inline:
        values.update({"ssl.keystore.certificate.chain": chain.decode(), "ssl.keystore.key": key_pem.decode()})
    else:
        keystore = tmp_path / "keystore.pem"
        keystore.write_bytes(chain + key_pem)
        values["ssl.keystore.location"] = str(keystore)
    if password is not None:
        values["ssl.key.password"] = password.decode()
    return Config(values)


@pytest.mark.parametrize("inline, password", [(False, None), (True, None), (False, b"secret")])
def test_pem_key_material_loads(ca, tmp_path, inline, password):
    listener = client_listener(tls_config(ca, tmp_path, inline, password))
    assert listener.protocol is SecurityProtocol.SSL and isinstance(listener.ssl, ssl.SSLContext)


def test_missing_or_wrong_key_material_is_a_one_line_error(ca, tmp_path):
    with pytest.raises(TlsConfigError, match="ssl.keystore.location"):
        server_context(Config({"listeners": "SSL://h:1"}))
    with pytest.raises(TlsConfigError, match="cannot load"):
        server_context(Config({"ssl.keystore.location": str(tmp_path / "missing.pem")}))
    with pytest.raises(TlsConfigError, match="PEM only"):
        server_context(Config({"ssl.keystore.type": "JKS"}))


def test_a_tls_gateway_socket_serves_a_request(ca, tmp_path):
    listener = client_listener(tls_config(ca, tmp_path))

    async def scenario() -> dict:
        server, _ = await serve(lambda r: msgpack.packb({"ok": True, "result": "tls"}), "127.0.0.1", 0, 1 << 20,
                                new_session=lambda: Session(ListenerKind.OPERATOR), ssl=listener.ssl)
        port = server.sockets[0].getsockname()[1]
        client = ssl.create_default_context()
        ca.configure_trust(client)
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        writer.write(admin_frame("status"))
        size = int.from_bytes(await reader.readexactly(4), "big")
        payload = await reader.readexactly(size)
        writer.close()
        server.close()
        return msgpack.unpackb(payload[4:])

    assert asyncio.run(scenario()) == {"ok": True, "result": "tls"}
