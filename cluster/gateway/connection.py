"""The server side of one Kafka client connection, sans I/O (after h11).

Feed it the bytes a socket delivered; it returns events: a parsed request to route, or the
decision to close the connection. Hand it each request's answer whenever it is ready; it releases
the framed answers strictly in request order (Kafka clients match answers to requests by order
on a connection), and says when to stop reading because too many answers are outstanding and
when to read again. asyncio only moves bytes, so every malformed, partial or oversize frame, and
every order in which answers complete, is testable (and fuzzable) without sockets.

Kafka's treatment of bad input (SocketServer / RequestContext, PROTOCOL.md §1):
- a size prefix above socket.request.max.bytes (or negative) closes the connection before the
  body is read;
- a request whose header or body does not parse closes the connection; so does one with a length
  that does not fit in the frame or a null in a non-nullable field, found by a bounded walk of the
  frame before kio reads it (frame_check.py: kio's native reader would preallocate the length);
- an unknown API key, or a version outside the advertised range, closes the connection, except
  ApiVersions: any version is accepted and a version we do not speak is answered as v0 with
  UNSUPPORTED_VERSION and our ranges, so that the client can negotiate down (KIP-511);
- before SASL succeeds, anything but ApiVersions, SaslHandshake and SaslAuthenticate closes the
  connection unparsed (Kafka's SaslServerAuthenticator: "Unexpected Kafka request during SASL
  handshake"); the operator listener serves raygroups' operator API and nothing else;
- after a SaslHandshake v0 succeeds, the frames are raw SASL tokens, without a request header,
  answered with raw tokens, until authentication succeeds; a failure closes without an answer
  (a v0 client would not understand one). Kafka handles one authentication frame at a time, so
  before authentication succeeds, and after a v0 handshake, nothing more is parsed until the last
  request has been answered (two SaslAuthenticate of one exchange never run at once).

Limits (issue 21; the listener's, in `session.limits`):
- before authentication a frame above sasl.server.max.receive.size fails authentication and closes
  (SaslServerAuthenticator: InvalidReceiveException); so does a request SASL does not allow then;
  such a Close says `authentication_failed`: the shell delays it and counts it, as Kafka's Selector;
- request bytes count against queued.max.request.bytes as they arrive (connection_limits.py);
- a connection that received and sent nothing for connections.max.idle.ms, a half-sent frame
  included, is closed when the shell asks (`expire_idle`), unless it is owed an answer.
"""

from __future__ import annotations

import collections
import functools
import struct
import time
from dataclasses import dataclass
from typing import Any, Callable

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from cluster.entity_writer import encode_entity
from cluster.gateway.answers import build_response
from cluster.gateway.apis import ADMIN_API_KEY, ApiKey, is_supported, request_class
from cluster.gateway.auth.session import Session
from cluster.gateway.connection_limits import RequestMemory
from cluster.gateway.frame_check import MalformedFrame, check_body, read_request_header

_SIZE = struct.Struct(">i")
_HEADER_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id: fixed in every header version


@dataclass(slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # a kio request entity; for ADMIN_API_KEY the raw msgpack bytes
    size: int
    # ApiVersions at a version we do not speak: answer as v0 with UNSUPPORTED_VERSION.
    unsupported_api_versions: bool = False
    client_host: str = ""  # the peer's address, as Kafka reports a member's client host
    connection_id: int = 0  # which client connection it came on (share sessions end with it)
    # Run once the answer has been handed to the socket: an operator killing the gateway they are
    # connected to must get the answer before the kill lands.
    after_reply: Callable[[], None] | None = None
    session: Session | None = None  # the connection's listener and principal
    # Close once this answer is out: a failed authentication is answered, then the connection ends.
    close_after_reply: str | None = None
    authentication_failed: bool = False  # that close is a failed authentication (delayed, counted)
    raw_sasl: bool = False  # a raw SASL token after a SaslHandshake v0: answered as a raw token
    received_at: float = 0.0  # time.perf_counter() when its frame was read (request latency metrics)


@dataclass(slots=True)
class Close:
    reason: str
    # Kafka's AuthenticationException during authentication: its answer and the close are delayed by
    # connection.failed.authentication.delay.ms, and it is logged and counted (Selector).
    authentication_failed: bool = False
    # What closed it, the label of the connections_closed metric: the setting whose limit it hit
    # (socket.request.max.bytes, sasl.server.max.receive.size, connections.max.idle.ms), or
    # bad_request, handler_error, failed_authentication, connection_lost.
    cause: str = "bad_request"


Event = Request | Close


@dataclass(slots=True)
class Reply:
    """The next answer to write, in request order; data None: this request gets no answer (Produce
    with acks=0, or a handler cancelled because the connection is going away)."""

    request: Request
    data: bytes | None


@dataclass(slots=True)
class PauseReading:
    """Too many answers are outstanding: stop reading requests until ResumeReading."""


@dataclass(slots=True)
class ResumeReading:
    pass


Outbound = Reply | Close | PauseReading | ResumeReading

MAX_OUTSTANDING = 256

# What a connection that has not authenticated yet may ask (Kafka serves these during SASL).
_BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})

_PENDING = object()


class _Slot:
    __slots__ = ("request", "data", "failure", "reserved")

    def __init__(self, request: Request, reserved: int) -> None:
        self.request = request
        self.data: Any = _PENDING
        self.failure: str | None = None
        self.reserved = reserved  # bytes of queued.max.request.bytes held until the answer is out


class ProtocolViolation(Exception):
    def __init__(self, message: str, authentication_failed: bool = False) -> None:
        super().__init__(message)
        self.authentication_failed = authentication_failed


class KafkaConnection:
    def __init__(
        self,
        max_request_bytes: int = 104_857_600,
        max_outstanding: int = MAX_OUTSTANDING,
        session: Session | None = None,
        memory: RequestMemory | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_request_bytes = max_request_bytes
        self.session = session if session is not None else Session()
        self.limits = self.session.limits
        self._clock = clock
        self.last_active = clock()  # when bytes last arrived or an answer last went out
        self.memory = memory if memory is not None else RequestMemory(-1)
        self._held = 0  # bytes of queued.max.request.bytes held: the buffer's and unanswered requests'
        self.waiting_for_memory = False
        self.max_outstanding = max_outstanding
        self._buffer = bytearray()
        self.closed: str | None = None
        self._outstanding: collections.deque[_Slot] = collections.deque()
        self._slots: dict[int, _Slot] = {}
        self.reading_paused = False
        self._raw_sasl = False  # frames are raw SASL tokens (after a SaslHandshake v0)
        self._held_for: Request | None = None  # parse nothing more until this is answered
        # The held request was answered with frames still buffered: feed receive(b"") again.
        self.input_waiting = False

    @property
    def outstanding(self) -> int:
        """Requests received whose answers have not been released yet."""
        return len(self._outstanding)

    def receive(self, data: bytes) -> list[Event]:
        """Requests complete in the bytes received so far, in order; a Close ends the stream."""
        if self.closed is not None:
            return []
        # Frames are cut from the bytes as received and the rest is kept once, rather than deleting
        # each frame from the front of a buffer (a move of all that follows it).
        if data:
            self.memory.take(len(data))
            self._held += len(data)
            self.last_active = self._clock()
        if self._buffer:
            self._buffer += data
        buffer: bytes | bytearray = self._buffer or data
        events: list[Event] = []
        self.waiting_for_memory = False
        self.input_waiting = False
        pos = 0
        end = len(buffer)
        while end - pos >= 4 and self._held_for is None:
            (size,) = _SIZE.unpack_from(buffer, pos)
            if size < 0 or size > self.max_request_bytes:
                return events + [self._close(
                    f"request size {size} is outside 0..socket.request.max.bytes ({self.max_request_bytes})",
                    cause="socket.request.max.bytes",
                )]
            if size > self.limits.sasl_server_max_receive_size and not self.session.authenticated:
                # SaslServerAuthenticator reads with its own NetworkReceive bound until authenticated.
                return events + [self._close(
                    "Failing SASL authentication due to invalid receive size: Invalid receive "
                    f"(size = {size} larger than {self.limits.sasl_server_max_receive_size})",
                    authentication_failed=True, cause="sasl.server.max.receive.size",
                )]
            if end - pos < 4 + size:
                break
            frame = bytes(buffer[pos + 4 : pos + 4 + size])
            pos += 4 + size
            try:
                request = self._raw_token(frame) if self._raw_sasl else self._parse(frame)
            except ProtocolViolation as exc:
                failed = exc.authentication_failed
                return events + [self._close(str(exc), failed, "failed_authentication" if failed else "bad_request")]
            request.session = self.session
            if not self.session.authenticated or request.raw_sasl or _is_handshake_v0(request):
                self._held_for = request
            slot = _Slot(request, 4 + size)  # its bytes stay held until its answer is out
            self._outstanding.append(slot)
            self._slots[id(request)] = slot
            events.append(request)
        if buffer is self._buffer:
            del self._buffer[:pos]
        else:
            self._buffer = bytearray(buffer[pos:])
        self.waiting_for_memory = self.memory.must_wait(self._held)  # read no further until memory comes back
        return events

    def respond(self, request: Request, response: Any) -> None:
        """request's answer: a kio response, the admin API's bytes, or None for no answer."""
        slot = self._slots.get(id(request))
        if slot is None or slot.data is not _PENDING:
            return  # closed meanwhile, or answered twice (a bug the first answer wins over)
        if request is self._held_for:
            self._release_hold(request, response)
        if response is None:
            slot.data = None
            return
        try:
            if request.raw_sasl:
                # A failure closes unanswered (close_after_reply is set); success sends the token.
                ok = response.error_code == ErrorCode.none
                slot.data = _SIZE.pack(len(response.auth_bytes)) + bytes(response.auth_bytes) if ok else None
                return
            slot.data = (
                encode_admin_response(request, response)
                if request.api_key == ADMIN_API_KEY
                else encode_response(request, response)
            )
        except Exception as exc:  # a handler built a response its version cannot carry
            self.fail(request, f"cannot encode the answer to api {request.api_key}: {type(exc).__name__}: {exc}")

    def _release_hold(self, request: Request, response: Any) -> None:
        self._held_for = None
        # The handshake handler starts an exchange only when it accepts the mechanism.
        mid_sasl = self.session.sasl is not None and not self.session.authenticated
        if _is_handshake_v0(request):
            self._raw_sasl = mid_sasl and response is not None and response.error_code == ErrorCode.none
        elif request.raw_sasl:
            self._raw_sasl = mid_sasl
        self.input_waiting = bool(self._buffer) and self.closed is None

    def fail(self, request: Request, reason: str) -> None:
        """The handler of request failed: once the answers before it are out, close (Kafka drops a
        connection on an unexpected error and keeps serving the others)."""
        slot = self._slots.get(id(request))
        if slot is not None and slot.data is _PENDING:
            slot.data = None
            slot.failure = reason
        if request is self._held_for:
            self._held_for = None  # the connection closes once the answers before it are out

    def next_events(self) -> list[Outbound]:
        """The answers ready to write, in request order, then any change in whether to read."""
        out: list[Outbound] = []
        if self._outstanding and self._outstanding[0].data is not _PENDING:
            self.last_active = self._clock()
        while self._outstanding and self._outstanding[0].data is not _PENDING:
            slot = self._outstanding.popleft()
            del self._slots[id(slot.request)]
            self.memory.release(slot.reserved)
            self._held -= slot.reserved
            slot.reserved = 0
            if slot.failure is not None:
                out.append(self._close(slot.failure, cause="handler_error"))
                return out
            out.append(Reply(slot.request, slot.data))
            if slot.request.close_after_reply is not None:
                failed = slot.request.authentication_failed
                out.append(self._close(slot.request.close_after_reply, authentication_failed=failed,
                                       cause="failed_authentication" if failed else "closed_after_reply"))
                return out
        if self.closed is not None:
            return out
        if not self.reading_paused and (len(self._outstanding) > self.max_outstanding or self.waiting_for_memory):
            self.reading_paused = True
            out.append(PauseReading())
        elif (
            self.reading_paused
            and len(self._outstanding) <= self.max_outstanding // 2
            and not self.waiting_for_memory
        ):
            self.reading_paused = False
            out.append(ResumeReading())
        return out

    def abandon(self) -> None:
        """The socket is gone: give back every byte this connection holds."""
        if self.closed is None:
            self._close("connection lost", cause="connection_lost")

    def idle_deadline(self) -> float | None:
        """When (on the clock) this connection is idle for connections.max.idle.ms if nothing arrives
        or goes out before; None: never (the setting is negative, it is closed, or it is owed an answer:
        the wait is the gateway's, not the client's)."""
        idle_ms = self.limits.connections_max_idle_ms
        if idle_ms < 0 or self.closed is not None or self._outstanding:
            return None
        return self.last_active + idle_ms / 1000

    def expire_idle(self, now: float) -> Close | None:
        """Close if idle at `now` (Kafka's Selector.maybeCloseOldestConnection); a frame left half sent
        is idle as well: its bytes are given back."""
        deadline = self.idle_deadline()
        if deadline is None or now < deadline:
            return None
        idle_ms = self.limits.connections_max_idle_ms
        return self._close(f"idle for {round((now - self.last_active) * 1000)} ms (connections.max.idle.ms={idle_ms})",
                           cause="connections.max.idle.ms")

    def _close(self, reason: str, authentication_failed: bool = False, cause: str = "bad_request") -> Close:
        self.closed = reason
        self._buffer.clear()
        held, self._held = self._held, 0
        for slot in self._outstanding:
            slot.reserved = 0
        self.memory.release(held)
        return Close(reason, authentication_failed, cause)

    def _parse(self, frame: bytes) -> Request:
        if len(frame) < _HEADER_PREFIX.size:
            raise ProtocolViolation(f"request of {len(frame)} bytes is shorter than a request header")
        api_key, api_version, correlation_id = _HEADER_PREFIX.unpack_from(frame, 0)
        self._admit(api_key)
        if api_key == ADMIN_API_KEY:
            return self._parse_admin(frame, api_version, correlation_id)
        if api_key == ApiKey.API_VERSIONS and not is_supported(api_key, api_version):
            # KIP-511: the header still parses as v1/v2, but the body may be of a version we do not
            # know, so it is not parsed at all; the answer is v0 with our ranges.
            return Request(api_key, api_version, correlation_id, None, None, len(frame), True)
        if not is_supported(api_key, api_version):
            raise ProtocolViolation(
                f"request api key {api_key} version {api_version} is not supported by this gateway"
            )
        cls, flexible_header, read_body = _parsing(api_key, api_version)
        try:
            client_id, offset = read_request_header(frame, flexible_header)
            check_body(frame, offset, cls)
        except MalformedFrame as exc:
            raise ProtocolViolation(f"malformed {ApiKey(api_key).name} v{api_version} request: {exc}") from None
        try:
            body, _used = read_body(frame, offset)
        except Exception as exc:  # kio raises several types for malformed input
            raise ProtocolViolation(
                f"malformed {ApiKey(api_key).name} v{api_version} request: {type(exc).__name__}: {exc}"
            ) from None
        # Like Kafka's parser, bytes after the body are ignored (librdkafka sends some on Metadata v12).
        return Request(api_key, api_version, correlation_id, client_id, body, len(frame))

    def _raw_token(self, frame: bytes) -> Request:
        body = request_class(ApiKey.SASL_AUTHENTICATE, 0)(auth_bytes=frame)
        return Request(ApiKey.SASL_AUTHENTICATE, 0, 0, None, body, len(frame), raw_sasl=True)

    def _admit(self, api_key: int) -> None:
        """Refuse, before parsing, what this connection's listener and state do not serve."""
        if self.session.operator_listener:
            if api_key != ADMIN_API_KEY:
                raise ProtocolViolation(f"api key {api_key} on the operator listener, which serves only the operator API")
        elif not self.session.authenticated and api_key not in _BEFORE_AUTHENTICATION:
            # Kafka's IllegalSaslStateException: a failed authentication.
            raise ProtocolViolation(f"unexpected request (api key {api_key}) before SASL authentication",
                                    authentication_failed=True)

    def _parse_admin(self, frame: bytes, api_version: int, correlation_id: int) -> Request:
        # Header v1 layout (key, version, correlation id, nullable string client id), then msgpack.
        if len(frame) < 10:
            raise ProtocolViolation("admin request too short")
        (client_len,) = struct.unpack_from(">h", frame, 8)
        start = 10 + max(client_len, 0)
        if start > len(frame):
            raise ProtocolViolation("admin request header truncated")
        client_id = frame[10:start].decode("utf-8", "replace") if client_len >= 0 else None
        return Request(ADMIN_API_KEY, api_version, correlation_id, client_id, frame[start:], len(frame))


def _is_handshake_v0(request: Request) -> bool:
    return request.api_key == ApiKey.SASL_HANDSHAKE and request.api_version == 0


@functools.cache
def _parsing(api_key: int, api_version: int) -> tuple[type, bool, Callable[[bytes, int], tuple[Any, int]]]:
    """(request class, whether its header is v2 (flexible), kio's reader of its body)."""
    cls = request_class(api_key, api_version)
    return cls, cls.__header_schema__.__flexible__, entity_reader(cls)


def encode_response(request: Request, response: Any) -> bytes:
    """Frame a kio response entity for request (header version per the response schema)."""
    body = _encoded_body(response)
    # Response header v0 is the correlation id; v1 adds an empty tagged-field section.
    if type(response).__header_schema__.__flexible__:
        return _FLEXIBLE_PREFIX.pack(len(body) + 5, request.correlation_id, 0) + body
    return _PREFIX.pack(len(body) + 4, request.correlation_id) + body


_PREFIX, _FLEXIBLE_PREFIX = struct.Struct(">ii"), struct.Struct(">iiB")
# Answers that handlers reuse for many requests (one heartbeat answer per version and outcome), with
# their encoded bodies. Only what `shared_answer` names is kept: caching every small answer churned
# the cache with one-off answers and pushed the shared ones out. The entity is held, so its id
# cannot be reused while its bytes are kept.
_SHARED_BODIES: dict[int, tuple[Any, bytes]] = {}


def shared_answer(response: Any) -> Any:
    """Declare `response` an answer entity that is sent many times unchanged: it is encoded once."""
    _SHARED_BODIES[id(response)] = (response, encode_entity(response))
    return response


def _encoded_body(response: Any) -> bytes:
    kept = _SHARED_BODIES.get(id(response))
    if kept is not None and kept[0] is response:
        return kept[1]
    return encode_entity(response)


def encode_admin_response(request: Request, payload: bytes) -> bytes:
    """Admin responses: response header v0 (correlation id) and a msgpack body."""
    return _SIZE.pack(4 + len(payload)) + struct.pack(">i", request.correlation_id) + payload


def unsupported_api_versions_response(supported: dict[int, tuple[int, int]]) -> Any:
    return build_response(
        ApiKey.API_VERSIONS,
        0,
        {
            "error_code": ErrorCode.unsupported_version,
            "api_keys": [
                {"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(supported.items())
            ],
        },
    )
