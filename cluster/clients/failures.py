"""What a dead or unreachable actor looks like to a caller, in one place.

Ray reports an actor that died before or during a call as RayActorError (or another RayError),
and an awaited call whose actor went away mid-await may surface as a cancellation; a call over the
actor's channel (cluster/channels) whose socket closed fails with ChannelClosed. Callers treat
all of them alike: the partition has no reachable leader right now.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ray.exceptions import RayActorError, RayError

from cluster.channels import ChannelClosed

ACTOR_GONE = (RayActorError, RayError, ChannelClosed, asyncio.CancelledError)
# The same, raised by a call whose actor died or whose channel closed under it, for a caller that
# must not take its own cancellation for that (it goes on up).
ACTOR_LOST = tuple(e for e in ACTOR_GONE if e is not asyncio.CancelledError)


async def answer_or_none(ref: Any) -> Any:
    """What a Ray call answered, or None if there was no actor to call or it died meanwhile."""
    if ref is None:
        return None
    try:
        return await ref
    except ACTOR_GONE:
        return None
