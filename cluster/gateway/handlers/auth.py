"""SaslHandshake and SaslAuthenticate (Kafka's SaslServerAuthenticator, in the gateway).

The handshake picks a mechanism from `sasl.enabled.mechanisms`; SaslAuthenticate carries the
mechanism's messages. Success makes the connection's principal `User:name`; a failure is
answered with SASL_AUTHENTICATION_FAILED and its message, then the connection is closed, as
Kafka does. After a handshake v0 the connection hands each raw token here as a SaslAuthenticate
v0 (connection.py answers it raw, and a failure closes without an answer).

Every failure before authentication (an unknown mechanism, an illegal state, wrong credentials) is
Kafka's AuthenticationException: the request is marked `authentication_failed`, and the server
delays its answer and the close by connection.failed.authentication.delay.ms, logs and counts it
(server.py). The exchange's work (PBKDF2 for PLAIN, the credential store's reads) runs off the event
loop (auth/off_loop.py); successes are counted as Kafka's successful-authentication-total.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.gateway.answers import build_response
from cluster.gateway.auth import off_loop
from cluster.gateway.auth.principals import user
from cluster.gateway.auth.scram import HASHES, AuthenticationFailed, exchange_for
from cluster.gateway.context import GatewayContext
from cluster.gateway.request_metrics import record_successful_authentication

_KNOWN = {"PLAIN", *HASHES}


def sasl_handshake(gw: GatewayContext, request: Any) -> Any:
    session = request.session
    mechanisms = [m for m in gw.sasl_mechanisms if m in _KNOWN]

    def answer(code: ErrorCode) -> Any:
        return build_response(ApiKey.SASL_HANDSHAKE, request.api_version, {"error_code": code, "mechanisms": mechanisms})

    if session is None or session.authenticated or session.sasl is not None:
        request.close_after_reply = "SaslHandshake outside a SASL authentication"
        request.authentication_failed = _authenticating(session)
        return answer(ErrorCode.illegal_sasl_state)
    mechanism = request.body.mechanism
    if mechanism not in mechanisms:
        request.close_after_reply = f"Unsupported SASL mechanism {mechanism}"
        request.authentication_failed = True
        return answer(ErrorCode.unsupported_sasl_mechanism)
    session.sasl = exchange_for(mechanism, gw.credentials.lookup)
    return answer(ErrorCode.none)


async def sasl_authenticate(gw: GatewayContext, request: Any) -> Any:
    session = request.session

    def answer(code: ErrorCode, message: str | None = None, data: bytes = b"") -> Any:
        return build_response(ApiKey.SASL_AUTHENTICATE, request.api_version,
                              {"error_code": code, "error_message": message, "auth_bytes": data})

    if session is None or session.authenticated or session.sasl is None:
        request.close_after_reply = "SaslAuthenticate outside a SASL authentication"
        request.authentication_failed = _authenticating(session)
        return answer(ErrorCode.illegal_sasl_state, "SaslAuthenticate before a SaslHandshake")
    exchange = session.sasl
    try:
        # One exchange step at a time: the connection reads nothing more until this is answered.
        data = await off_loop.run(exchange.respond, bytes(request.body.auth_bytes))
    except AuthenticationFailed as exc:
        request.close_after_reply = f"SASL authentication failed: {exc}"
        request.authentication_failed = True
        return answer(ErrorCode.sasl_authentication_failed, str(exc))
    if exchange.user is not None:
        session.principal = user(exchange.user)
        session.sasl = None
        record_successful_authentication()
    return answer(ErrorCode.none, None, data)


def _authenticating(session: Any) -> bool:
    """A SASL request out of place is a failed authentication only while the connection has not
    authenticated (Kafka's IllegalSaslStateException during SASL)."""
    return session is not None and not session.authenticated
