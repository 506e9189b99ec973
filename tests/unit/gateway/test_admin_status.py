"""The operator's status over a gateway: the groups' counts never hold the rest of the answer.
A group coordinator on a node just lost is answered for only once Ray declares its actor dead,
ten seconds and more after the controller moved its partitions; status waited that long (the
node-loss experiment, polling it, measured the wait as the fault's)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import msgpack
from kio.schema.errors import ErrorCode

from cluster.calls import Listing
from cluster.gateway.handlers import admin as admin_handler


class Controller:
    async def status(self):
        return {"leaders": [], "topics": [], "events": []}


class Coordinators:
    def __init__(self, answer):
        self.answer = answer
        self.asked = 0

    async def list_groups(self):
        self.asked += 1
        if self.answer is None:
            await asyncio.Event().wait()  # a coordinator whose node is gone: no answer
        return self.answer


def gateway(answer):
    return SimpleNamespace(controller=Controller(), node_id="node-0", router=SimpleNamespace(refreshes=0),
                           coordinators=Coordinators(answer), name="gateway-0")


def status(gw, **args):
    request = SimpleNamespace(body=msgpack.packb({"op": "status", "args": args}))
    return msgpack.unpackb(asyncio.run(admin_handler.admin(gw, request)))


def test_status_counts_groups_by_type_and_state():
    groups = (SimpleNamespace(group_type="classic", state="Stable"), SimpleNamespace(group_type="classic", state="Stable"),
              SimpleNamespace(group_type="share", state="Empty"))
    answer = status(gateway(Listing(ErrorCode.none, groups)))
    assert answer["ok"] is True
    assert answer["result"]["groups"] == {"classic": {"Stable": 2}, "share": {"Empty": 1}}
    assert "groups_error" not in answer["result"]


def test_a_coordinator_that_does_not_answer_leaves_the_groups_unknown_not_the_status(monkeypatch):
    monkeypatch.setattr(admin_handler, "GROUPS_WITHIN_S", 0.05)
    answer = status(gateway(None))
    assert answer["ok"] is True
    assert answer["result"]["groups"] == {}
    assert "did not answer" in answer["result"]["groups_error"]
    assert answer["result"]["gateway"] == {"node_id": "node-0", "refreshes": 0}


def test_a_listing_error_is_said_not_shown_as_no_groups():
    answer = status(gateway(Listing(ErrorCode.coordinator_not_available)))
    assert answer["result"]["groups"] == {}
    assert answer["result"]["groups_error"] == "a group coordinator answered coordinator_not_available"


def test_status_without_groups_asks_no_coordinator():
    gw = gateway(None)
    answer = status(gw, groups=False)
    assert answer["ok"] is True and "groups" not in answer["result"]
    assert gw.coordinators.asked == 0


def test_a_listing_that_raises_is_said_not_the_whole_status():
    class Failing(Coordinators):
        async def list_groups(self):
            raise RuntimeError("the router has no map yet")

    gw = gateway(None)
    gw.coordinators = Failing(None)
    answer = status(gw)
    assert answer["ok"] is True
    assert answer["result"]["groups_error"] == "listing the groups failed: the router has no map yet"
