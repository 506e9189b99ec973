"""AlterUserScramCredentials / DescribeUserScramCredentials (issue 10): super users only, Kafka's
per-user errors (ScramControlManager, ScramImage.describe), and a user created this way
authenticates with SCRAM."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
from kafka.net.sasl.scram import ScramClient
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest, UserName
from kio.schema.errors import ErrorCode

from cluster.config import Config
from cluster.gateway.apis import SUPPORTED, ApiKey
from cluster.gateway.auth.client_listener import client_listener
from cluster.gateway.auth.credentials import CredentialStore, path_in
from cluster.gateway.auth.scram import make_credential
from cluster.gateway.auth.session import Session
from cluster.gateway.connection import Close, KafkaConnection, Request
from cluster.gateway.gateway import Gateway
from cluster.gateway.handlers import HANDLERS
from tests.unit.test_connection import frame
from tests.unit.test_sasl import Client

SHA256, SHA512 = 1, 2


@pytest.fixture()
def gateway(tmp_path):
    store = CredentialStore(path_in(tmp_path))
    store.change(upserts=[("admin", make_credential("SCRAM-SHA-256", "admin-pw"))])
    gw = Gateway.__new__(Gateway)
    gw._handlers = HANDLERS
    gw.super_users = frozenset({"User:admin"})
    gw.operator_address = None
    gw.sasl_mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    gw.credentials = store
    return gw


def ask(gw, api_key, body, principal="User:admin"):
    (request,) = KafkaConnection(session=Session(principal=principal)).receive(frame(api_key, 0, body))
    assert isinstance(request, Request)
    outcome = gw.dispatch(request)
    return asyncio.run(outcome) if asyncio.iscoroutine(outcome) else outcome


def upsertion(name, password, mechanism=SHA256, iterations=4096, salt=b"0123456789abcdef"):
    algorithm = {SHA256: "sha256", SHA512: "sha512"}.get(mechanism, "sha256")
    salted = hashlib.pbkdf2_hmac(algorithm, password.encode(), salt, max(iterations, 1))
    return ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted)


def alter(gw, deletions=(), upsertions=(), principal="User:admin"):
    body = AlterUserScramCredentialsRequest(deletions=tuple(deletions), upsertions=tuple(upsertions))
    response = ask(gw, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body, principal)
    return {r.user: (r.error_code, r.error_message) for r in response.results}


def describe(gw, users=None, principal="User:admin"):
    body = DescribeUserScramCredentialsRequest(users=None if users is None else tuple(UserName(name=u) for u in users))
    return ask(gw, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body, principal)


def test_both_apis_are_advertised():
    assert SUPPORTED[ApiKey.ALTER_USER_SCRAM_CREDENTIALS] == (0, 0)
    assert SUPPORTED[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS] == (0, 0)


@pytest.mark.parametrize("mechanism, name", [(SHA256, "SCRAM-SHA-256"), (SHA512, "SCRAM-SHA-512")])
def test_a_user_a_super_user_creates_authenticates_with_scram(gateway, mechanism, name):
    assert alter(gateway, upsertions=[upsertion("bob", "bob-pw", mechanism, 8192)]) == {"bob": (ErrorCode.none, None)}
    client = Client(gateway)
    assert client.handshake(name).error_code == ErrorCode.none
    scram = ScramClient("bob", "bob-pw", name)
    first = client.authenticate(scram.first_message())
    scram.process_server_first_message(first.auth_bytes)
    final = client.authenticate(scram.final_message())
    assert final.error_code == ErrorCode.none
    scram.process_server_final_message(final.auth_bytes)
    assert client.conn.session.principal == "User:bob"
    assert "bob-pw" not in path_in(gateway.credentials.path.parent).read_text()


def test_describe_lists_users_with_their_mechanisms_and_iterations(gateway):
    alter(gateway, upsertions=[upsertion("bob", "pw", SHA512, 5000)])
    every = describe(gateway)
    assert every.error_code == ErrorCode.none
    found = {r.user: [(c.mechanism, c.iterations) for c in r.credential_infos] for r in every.results}
    assert found == {"admin": [(SHA256, 4096)], "bob": [(SHA512, 5000)]}
    assert [r.user for r in describe(gateway, []).results] == ["admin", "bob"]  # empty: every user too
    named = describe(gateway, ["bob", "nobody", "admin", "admin"])
    by_user = {r.user: r for r in named.results}
    assert by_user["bob"].error_code == ErrorCode.none
    assert by_user["nobody"].error_code == ErrorCode.resource_not_found
    assert by_user["nobody"].error_message == "Attempt to describe a user credential that does not exist: nobody"
    assert by_user["admin"].error_code == ErrorCode.duplicate_resource and not by_user["admin"].credential_infos


def test_kafkas_per_user_errors_and_the_valid_rest_applied(gateway):
    results = alter(
        gateway,
        deletions=[ScramCredentialDeletion(name="ghost", mechanism=SHA256),
                   ScramCredentialDeletion(name="twice", mechanism=SHA256)],
        upsertions=[upsertion("few", "pw", iterations=1024), upsertion("many", "pw", iterations=16385),
                    upsertion("odd", "pw", mechanism=0), upsertion("", "pw"),
                    upsertion("twice", "pw"), upsertion("dup", "a"), upsertion("dup", "b"),
                    upsertion("edge", "pw", iterations=16384), upsertion("ok", "pw")],
    )
    assert results["ghost"] == (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
    assert results["twice"][0] == ErrorCode.resource_not_found  # its deletion failed first; the upsert is skipped
    assert results["few"] == (ErrorCode.unacceptable_credential, "Too few iterations")
    assert results["many"] == (ErrorCode.unacceptable_credential, "Too many iterations")
    assert results["odd"] == (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    assert results[""] == (ErrorCode.unacceptable_credential, "Username must not be empty")
    assert results["dup"] == (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")
    assert results["edge"] == results["ok"] == (ErrorCode.none, None)
    assert set(gateway.credentials.users()) == {"admin", "edge", "ok"}


def test_a_deletion_and_an_upsertion_of_one_user_is_a_duplicate(gateway):
    results = alter(gateway, deletions=[ScramCredentialDeletion(name="admin", mechanism=SHA256)],
                    upsertions=[upsertion("admin", "new")])
    assert results == {"admin": (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")}
    assert gateway.credentials.lookup("admin", "SCRAM-SHA-256").verifies("admin-pw")


def test_a_super_user_deletes_a_credential(gateway):
    alter(gateway, upsertions=[upsertion("bob", "pw")])
    assert alter(gateway, deletions=[ScramCredentialDeletion(name="bob", mechanism=SHA256)]) == {"bob": (ErrorCode.none, None)}
    assert "bob" not in gateway.credentials.users()


@pytest.mark.parametrize("principal", ["User:alice", "User:ANONYMOUS"])
def test_anyone_but_a_super_user_is_refused_and_nothing_changes(gateway, principal):
    before = path_in(gateway.credentials.path.parent).read_bytes()
    results = alter(gateway, deletions=[ScramCredentialDeletion(name="admin", mechanism=SHA256)],
                    upsertions=[upsertion("eve", "pw")], principal=principal)
    assert {u: code for u, (code, _) in results.items()} == {
        "admin": ErrorCode.cluster_authorization_failed, "eve": ErrorCode.cluster_authorization_failed}
    assert path_in(gateway.credentials.path.parent).read_bytes() == before
    refused = describe(gateway, ["admin"], principal=principal)
    assert refused.error_code == ErrorCode.cluster_authorization_failed
    assert [(r.user, r.error_code, r.credential_infos) for r in refused.results] == [("", ErrorCode.cluster_authorization_failed, ())]
    assert describe(gateway, None, principal=principal).results == ()


def test_before_sasl_they_close_the_connection_unparsed():
    conn = KafkaConnection(session=client_listener(Config({"listeners": "SASL_PLAINTEXT://h:1"})).new_session())
    (event,) = conn.receive(frame(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, DescribeUserScramCredentialsRequest(users=None)))
    assert isinstance(event, Close) and "before SASL authentication" in event.reason
