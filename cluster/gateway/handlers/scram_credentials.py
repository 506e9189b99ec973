"""AlterUserScramCredentials and DescribeUserScramCredentials: SCRAM users managed the Kafka way.

Super users only (Kafka authorizes ALTER / DESCRIBE on the cluster; raygroups has no ACLs, so
super.users is the authority): anyone else gets CLUSTER_AUTHORIZATION_FAILED, per user for an
alteration and at the top for a description, as Kafka's error responses put it. The store is a
file every gateway reads (auth/credentials.py); writing it blocks, so it runs off the loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.gateway.answers import build_response
from cluster.gateway.auth.credential_admin import describe, plan_alteration
from cluster.gateway.context import GatewayContext

log = logging.getLogger(__name__)

_REFUSED = "Cluster authorization failed."


def _is_super_user(gw: GatewayContext, request: Any) -> bool:
    session = request.session
    return session is not None and session.principal is not None and session.principal in gw.super_users


async def alter_user_scram_credentials(gw: GatewayContext, request: Any) -> Any:
    body = request.body

    def answer(results: list[dict]) -> Any:
        return build_response(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request.api_version, {"results": results})

    if not _is_super_user(gw, request):
        users = sorted({d.name for d in body.deletions} | {u.name for u in body.upsertions})
        return answer([{"user": u, "error_code": ErrorCode.cluster_authorization_failed, "error_message": _REFUSED}
                       for u in users])
    plan = plan_alteration(body.deletions, body.upsertions, gw.credentials.users())
    results = [{"user": r.user, "error_code": r.error_code, "error_message": r.error_message} for r in plan.results]
    if plan.upserts or plan.deletions:
        try:
            await asyncio.to_thread(gw.credentials.change, plan.upserts, plan.deletions)
        except OSError as exc:
            # The store could not be written (a full disk): the alterations that were to be made
            # failed, answered as Kafka's getErrorResponse answers them, UNKNOWN_SERVER_ERROR with
            # no message; the detail (a path, an errno) stays in the server's log.
            log.error("AlterUserScramCredentials: the credential store could not be written: %s", exc)
            for r in results:
                if r["error_code"] == ErrorCode.none:
                    r["error_code"], r["error_message"] = ErrorCode.unknown_server_error, None
    return answer(results)


def describe_user_scram_credentials(gw: GatewayContext, request: Any) -> Any:
    requested = [u.name for u in request.body.users] if request.body.users is not None else None

    def answer(data: dict) -> Any:
        return build_response(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request.api_version, data)

    if not _is_super_user(gw, request):
        refused = {"error_code": ErrorCode.cluster_authorization_failed, "error_message": _REFUSED}
        return answer({**refused, "results": [{"user": "", **refused} for _ in requested or ()]})
    results = [
        {"user": d.user, "error_code": d.error_code, "error_message": d.error_message,
         "credential_infos": [{"mechanism": m, "iterations": i} for m, i in d.credentials]}
        for d in describe(requested, gw.credentials.users())
    ]
    return answer({"error_code": ErrorCode.none, "results": results})
