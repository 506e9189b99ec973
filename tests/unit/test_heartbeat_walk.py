"""The Heartbeat walk, measured: the product files one classic Heartbeat's request crosses from the
socket to the shard and back (at most 20), and every product file that runs meanwhile.

A gateway (its real KafkaProtocol, Gateway, handlers, CoordinatorClient, router and batcher) and a
group coordinator body (its real host, runtime and GroupCoordinatorShard) run in this process; the
actor call between them is a direct call with the same arguments Ray would carry (the packed batch
bytes). A member joins and syncs first; then a profile hook follows the Heartbeat in each of its
forms (`Taint`) from its bytes arriving to its answer's bytes being written. Ray itself is not
counted (it is not ours), nor the Kafka codec library; nor the actor channel that takes Ray's place
between processes on one node (cluster/channels: frames.py and server.py on the route; Ray is not
running here, so the link calls the handle). At a4eeb8c, before issue 22, the same
measure gave 21 files on the route and 32 that ran.

    python -m tests.unit.test_heartbeat_walk     # prints the walk, file by file
"""

from __future__ import annotations

import asyncio
import io
import struct
import sys
import threading
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

from cluster.actors.group_coordinator import GroupCoordinator
from cluster.config import Config
from cluster.gateway.apis import ApiKey, build, request_class, response_class
from cluster.gateway.gateway import Gateway
from cluster.gateway.server import KafkaProtocol, ServerStats
from cluster.leadership import Leadership
from cluster.metadata import CONSUMER_OFFSETS

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("cluster", "coordinator", "kernel", "sharestate")
LIMIT = 20
GROUP = "walkers-5c1e0a9d"  # a name found nowhere else: what holds it is the request


class _Call:
    def __init__(self, body: Any, name: str) -> None:
        self.body, self.name = body, name

    def remote(self, *args: Any) -> Any:
        return asyncio.ensure_future(getattr(self.body, self.name)(*args))

    def options(self, **_: Any) -> "_Call":
        return _StreamCall(self.body, self.name)


class _StreamCall(_Call):
    """`handle.answers_stream.options(num_returns="streaming").remote(...)`: an async iterator of
    awaitables, as Ray's ObjectRefGenerator is."""

    def remote(self, *args: Any) -> Any:
        stream = getattr(self.body, self.name)(*args)

        class Refs:
            def __aiter__(self) -> "Refs":
                return self

            async def __anext__(self) -> Any:
                item = await stream.__anext__()
                ref = asyncio.get_running_loop().create_future()
                ref.set_result(item)
                return ref

        return Refs()


class InProcessHandle:
    """An actor handle whose calls run the body in this process."""

    def __init__(self, body: Any) -> None:
        self._body = body

    def __getattr__(self, name: str) -> _Call:
        return _Call(self._body, name)


class Wire(asyncio.Transport):
    """The socket's far side: what the gateway writes, and a future for the next whole frame."""

    def __init__(self) -> None:
        super().__init__()
        self.buffer = b""
        self.waiting: asyncio.Future | None = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def write(self, data: bytes) -> None:
        self.buffer += data
        if self.waiting is not None and not self.waiting.done() and len(self.buffer) >= 4:
            size = struct.unpack_from(">i", self.buffer)[0]
            if len(self.buffer) >= 4 + size:
                frame, self.buffer = self.buffer[4:4 + size], self.buffer[4 + size:]
                self.waiting.set_result(frame)

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


def frame(api_key: int, version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    request = build(request_class(api_key, version), body)
    header_cls = RequestHeaderV2 if type(request).__flexible__ else RequestHeaderV1
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header_cls(request_api_key=api_key, request_api_version=version,
                                              correlation_id=correlation_id, client_id="walk"))
    entity_writer(type(request))(buf, request)
    return struct.pack(">i", len(buf.getvalue())) + buf.getvalue()


class Walk:
    def __init__(self, data_dir: Path) -> None:
        self.config = Config.load(["offsets.topic.num.partitions=1", "group.initial.rebalance.delay.ms=0"])
        self.data_dir = data_dir
        self.correlation_id = 0

    async def start(self) -> None:
        self.body = GroupCoordinator("group-coordinator-0", self.config, str(self.data_dir))
        handle = InProcessHandle(self.body)
        leadership = Leadership(1, "walk", [], {}, {(CONSUMER_OFFSETS, 0): ("group-coordinator-0", 1)},
                                {"group-coordinator-0": handle})
        await self.body.update_leadership(leadership)
        await self.body.load([(CONSUMER_OFFSETS, 0, 1)])
        self.gateway = Gateway(0, self.config, None, leadership)
        self.wire = Wire()
        self.protocol = KafkaProtocol(self.gateway.dispatch, 1 << 20, ServerStats())
        self.protocol.connection_made(self.wire)

    async def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.correlation_id += 1
        self.wire.waiting = asyncio.get_running_loop().create_future()
        self.protocol.data_received(frame(api_key, version, self.correlation_id, body))
        payload = await self.wire.waiting
        cls = response_class(api_key, version)
        header, offset = entity_reader(cls.__header_schema__)(payload, 0)
        return entity_reader(cls)(payload, offset)[0]

    async def member(self) -> tuple[str, int]:
        joined = await self.call(ApiKey.JOIN_GROUP, 3, {
            "group_id": GROUP, "session_timeout": timedelta(seconds=30), "rebalance_timeout": timedelta(seconds=30),
            "member_id": "", "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}],
        })
        assert joined.error_code == ErrorCode.none, joined
        synced = await self.call(ApiKey.SYNC_GROUP, 3, {
            "group_id": GROUP, "generation_id": joined.generation_id, "member_id": joined.member_id,
            "assignments": [{"member_id": joined.member_id, "assignment": b""}],
        })
        assert synced.error_code == ErrorCode.none, synced
        return joined.member_id, joined.generation_id

    async def heartbeat(self, member_id: str, generation: int) -> Any:
        return await self.call(ApiKey.HEARTBEAT, 3, {"group_id": GROUP, "generation_id": generation,
                                                      "member_id": member_id})


def product_file(filename: str) -> str | None:
    path = Path(filename)
    try:
        relative = path.resolve().relative_to(ROOT)
    except ValueError:
        return None
    return str(relative) if relative.parts[0] in PRODUCT else None


class Taint:
    """The request in every form it takes, followed as the program runs. A form is a string or
    bytes holding the request's group id (a unique name: the frame's bytes, the packed batch), an
    object made with a form in hand (the request event, an item), a list holding a form (a batch),
    a closure or partial holding one (an operation queued on the runtime),
    or what a function returned after it was called with a form in hand (the decoded entity, the
    domain request, the response, the outcome, the answer's bytes), whichever code made it, ours or
    a library's. A product file is on the route when one of its functions is called with a form
    among its arguments. Side calls the route makes with other arguments (a metric, a timer's
    wakeup) and the state the request acts on (the group) are not the request's route."""

    def __init__(self, marker: str) -> None:
        self.marker, self.marker_bytes = marker, marker.encode()
        self.forms: dict[int, Any] = {}  # id -> the object, kept alive so that ids stay unique
        # Frames entered with a form in hand, kept alive so that a later frame cannot take an id.
        self.carrying: dict[int, Any] = {}
        self.files: dict[str, None] = {}
        self.all_files: dict[str, None] = {}
        self.names: dict[str, str | None] = {}

    def carries(self, obj: Any, depth: int = 0) -> bool:
        if id(obj) in self.forms:
            return True
        if isinstance(obj, str):
            return self.marker in obj
        if isinstance(obj, (bytes, bytearray, memoryview)):
            return self.marker_bytes in bytes(obj)
        if isinstance(obj, (list, tuple)) and depth < 2:
            return any(self.carries(element, depth + 1) for element in obj[:64])
        if depth < 2 and callable(obj):  # an operation handed on as a closure or a partial
            cells = [c.cell_contents for c in getattr(obj, "__closure__", None) or () if _filled(c)]
            return any(self.carries(v, depth + 1) for v in (*cells, *getattr(obj, "args", ())))
        return False

    def holds(self, frame: Any) -> bool:
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        return any(self.carries(frame.f_locals.get(n)) for n in names if n != "self")

    def _form(self, obj: Any) -> None:
        if obj is not None and not isinstance(obj, (bool, int, float, str)):
            self.forms[id(obj)] = obj

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        filename = frame.f_code.co_filename
        if filename not in self.names:
            self.names[filename] = product_file(filename)
        name = self.names[filename]
        if event == "call":
            if name is not None:
                self.all_files.setdefault(name, None)
            if self.holds(frame):
                self.carrying[id(frame)] = frame
                if name is not None:
                    self.files.setdefault(name, None)
                if frame.f_code.co_name == "__init__":
                    self._form(frame.f_locals.get("self"))
        elif event == "return" and id(frame) in self.carrying:
            if frame.f_code.co_flags & 0x2A0:  # a generator's or coroutine's yield is not its result
                return
            del self.carrying[id(frame)]
            self._form(arg)


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def heartbeat_walk(data_dir: Path) -> tuple[list[str], list[str], Any]:
    """The product files on a Heartbeat's route (in the order first entered), every product file
    that ran meanwhile, and the answer."""

    async def scenario() -> tuple[Taint, Any]:
        walk = Walk(data_dir)
        await walk.start()
        member_id, generation = await walk.member()
        await walk.heartbeat(member_id, generation)  # warm: first-use imports and caches are not the walk
        walk.correlation_id += 1
        data = frame(ApiKey.HEARTBEAT, 3, walk.correlation_id,
                     {"group_id": GROUP, "generation_id": generation, "member_id": member_id})
        taint = Taint(GROUP)
        walk.wire.waiting = asyncio.get_running_loop().create_future()
        sys.setprofile(taint.profile)
        threading.setprofile(taint.profile)
        try:
            walk.protocol.data_received(data)
            payload = await walk.wire.waiting
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
        cls = response_class(ApiKey.HEARTBEAT, 3)
        _, offset = entity_reader(cls.__header_schema__)(payload, 0)
        walk.gateway.coordinators.parked.close()
        await asyncio.sleep(0)
        await walk.body.host.runtime.close()
        return taint, entity_reader(cls)(payload, offset)[0]

    loop = asyncio.new_event_loop()
    try:
        taint, answer = loop.run_until_complete(scenario())
    finally:
        loop.close()
    return list(taint.files), list(taint.all_files), answer


def test_a_heartbeat_crosses_at_most_twenty_product_files(tmp_path):
    files, _, answer = heartbeat_walk(tmp_path)
    assert answer.error_code == ErrorCode.none
    # From the socket to the shard and back: the walk reaches both ends.
    assert "cluster/gateway/server.py" in files and "coordinator/classic/heartbeat_leave.py" in files
    assert len(files) <= LIMIT, "\n".join(files)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        walked, ran, answered = heartbeat_walk(Path(tmp) / str(uuid.uuid4()))
    for n, name in enumerate(walked, 1):
        print(f"{n:3} {name}")
    print(f"{len(walked)} product files on the route; answer {answered.error_code.name}")
    print(f"{len(ran)} product files ran meanwhile; off the route: {', '.join(f for f in ran if f not in walked)}")
