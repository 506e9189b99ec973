"""raygroups' operator API over the Kafka framing: status, actors, kill, move, pause, events,
leadership (every leadership change, cluster/control/leadership_changes.py).

Request body: msgpack {"op": name, "args": {...}}; response: msgpack {"ok": true, "result": ...}
or {"ok": false, "error": "one line"}. Documented in PROTOCOL.md §1 (raygroups extension).
"""

from __future__ import annotations

from typing import Any

import msgpack
from kio.schema.errors import ErrorCode

from cluster import eager
from cluster.gateway.context import GatewayContext


async def admin(gw: GatewayContext, request: Any) -> bytes:
    try:
        message = msgpack.unpackb(request.body)
        op = message["op"]
        args = message.get("args") or {}
    except Exception:
        return msgpack.packb({"ok": False, "error": "malformed admin request"})
    controller = gw.controller
    try:
        if op == "status":
            result: Any = await controller.status()
            result["gateway"] = {"node_id": gw.node_id, "refreshes": gw.router.refreshes}
            if args.get("groups", True):
                result["groups"], error = await _groups_by_type_and_state(gw)
                if error:
                    result["groups_error"] = error
        elif op == "actors":
            result = await controller.actors_info()
        elif op == "kill" and args["name"] == gw.name:
            # This very gateway: check the kill is allowed, answer, and only then have it done,
            # or the connection dies before the operator hears that it worked.
            result = await controller.check_kill(args["name"])
            request.after_reply = lambda: controller.kill_actor_soon(args["name"])
        elif op == "kill":
            result = await controller.kill_actor(args["name"])
        elif op == "move":
            result = await controller.move(args["topic"], int(args["partition"]), args["actor"])
        elif op == "pause":
            result = await controller.pause(args["name"], float(args["seconds"]))
        elif op == "events":
            result = await controller.events_since(int(args.get("since", 0)))
        elif op == "leadership":
            result = await controller.leadership_changes(int(args.get("since", 0)))
        else:
            return msgpack.packb({"ok": False, "error": f"unknown admin op {op!r}"})
    except Exception as exc:  # KeyError from the controller carries the user-facing message
        cause = getattr(exc, "cause", None) or exc
        text = cause.args[0] if isinstance(cause, KeyError) and cause.args else str(cause).splitlines()[-1]
        return msgpack.packb({"ok": False, "error": text})
    return msgpack.packb({"ok": True, "result": result}, default=str)


# How long status waits for the group coordinators' listing. A coordinator on a node just lost
# is answered for only once Ray declares its actor dead, ten seconds and more after the
# controller has moved its partitions: status, asked most when something is wrong, would wait
# that long (and the node-loss experiment, which polls it, measured that wait as the fault's).
GROUPS_WITHIN_S = 2.0


async def _groups_by_type_and_state(gw: GatewayContext) -> tuple[dict[str, dict[str, int]], str | None]:
    """{group type: {state: count}} over every group coordinator (ListGroups without filters),
    and why the counts are missing when they are (Kafka's ListGroups answers an error and no
    groups when any coordinator cannot list)."""
    try:
        listing = await eager.within(gw.coordinators.list_groups(), GROUPS_WITHIN_S)
    except eager.NotWithin:
        return {}, f"a group coordinator did not answer within {GROUPS_WITHIN_S:g} s"
    except Exception as exc:  # noqa: BLE001 - the counts are missing, the rest of the status is not
        return {}, f"listing the groups failed: {exc}"
    if listing.error_code != ErrorCode.none:
        return {}, f"a group coordinator answered {listing.error_code.name}"
    counts: dict[str, dict[str, int]] = {}
    for group in listing.groups:
        by_state = counts.setdefault(group.group_type, {})
        by_state[group.state] = by_state.get(group.state, 0) + 1
    return counts, None
