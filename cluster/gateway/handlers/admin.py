"""raygroups' operator API over the Kafka framing: status, actors, kill, move, pause, events,
leadership (every leadership change, cluster/control/leadership_changes.py).

Request body: msgpack {"op": name, "args": {...}}; response: msgpack {"ok": true, "result": ...}
or {"ok": false, "error": "one line"}. Documented in PROTOCOL.md §1 (raygroups extension).
"""

from __future__ import annotations

from typing import Any

import msgpack

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
            result["groups"] = await _groups_by_type_and_state(gw)
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


async def _groups_by_type_and_state(gw: GatewayContext) -> dict[str, dict[str, int]]:
    """{group type: {state: count}} over every group coordinator (ListGroups without filters)."""
    counts: dict[str, dict[str, int]] = {}
    for group in (await gw.coordinators.list_groups()).groups:
        by_state = counts.setdefault(group.group_type, {})
        by_state[group.state] = by_state.get(group.state, 0) + 1
    return counts
