"""What `raygroups status` and `raygroups actors` print: rich tables, or one JSON document (--json)
with the same facts, the per-partition leadership map included, for scripts."""

from __future__ import annotations

import json
import time
from typing import Any

from rich.table import Table

from cluster.cli_output import console


def print_json(document: Any) -> None:
    # Plain print, not rich: a script reads it, and rich would wrap long lines.
    print(json.dumps(document, indent=2, sort_keys=True, default=str), flush=True)


def actors_document(actors: list[dict[str, Any]], leaders: list[dict[str, Any]]) -> dict[str, Any]:
    return {"actors": sorted(actors, key=lambda a: (a["kind"], a["name"])), "leaders": leaders}


def status_document(state: dict[str, Any], actors: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "actors": sorted(actors, key=lambda a: (a["kind"], a["name"])),
        "nodes": sorted({a.get("node_id") or "?" for a in actors if a["alive"]}),
        "topics": state["topics"],
        "leaders": state["leaders"],
        "groups": state.get("groups", {}),
        **({"groups_error": state["groups_error"]} if state.get("groups_error") else {}),
        "replicas": state.get("replicas", []),
        "share_partitions": [sp for a in actors for sp in a.get("share_partitions") or []],
        "events": state["events"],
    }


def actors_table(actors: list[dict[str, Any]]) -> Table:
    table = Table(title="actors")
    for col in ("name", "kind", "node", "alive", "partitions led", "detail"):
        table.add_column(col)
    for a in sorted(actors, key=lambda a: (a["kind"], a["name"])):
        parts = a.get("partitions") or []
        detail = a.get("address", "")
        if "replica_id" in a:
            detail = f"replica {a['replica_id']}"  # the data directory it keeps its logs in
        if a["kind"] == "gateway" and "connections" in a:
            detail = f"{detail} conns={a['connections']} reqs={a['requests']}"
        if a.get("error"):
            detail = a["error"]
        table.add_row(
            a["name"],
            a["kind"],
            (a.get("node_id") or "")[:8],
            "[green]yes[/]" if a["alive"] else "[red]dead[/]",
            str(len(parts)),
            detail,
        )
    return table


def share_partitions_table(share_partitions: list[dict[str, Any]]) -> Table:
    """In-flight records of the share partitions the partition leaders hold (KIP-1226's direction)."""
    table = Table(title="share partitions in flight (on their leaders)")
    for col in ("group", "topic-partition", "start", "end", "available", "acquired", "acknowledged", "archived"):
        table.add_column(col, justify="left" if col in ("group", "topic-partition") else "right")
    for sp in sorted(share_partitions, key=lambda x: (x["group"], x["topic"], x["partition"])):
        table.add_row(
            sp["group"],
            f"{sp['topic']}-{sp['partition']}",
            str(sp["start_offset"]),
            str(sp["end_offset"]),
            *(str(sp.get(k, 0)) for k in ("available", "acquired", "acknowledged", "archived")),
        )
    return table


def print_status(state: dict[str, Any], actor_list: list[dict[str, Any]]) -> None:
    console.print(actors_table(actor_list))
    nodes = sorted({a.get("node_id") or "?" for a in actor_list if a["alive"]})
    console.print(f"[bold]{len(nodes)}[/] Ray node(s): " + ", ".join(n[:8] for n in nodes))
    topics = Table(title="topics")
    for col in ("topic", "partitions", "internal", "leaders (actor: partitions)"):
        topics.add_column(col)
    by_topic: dict[str, dict[str, int]] = {}
    for lead in state["leaders"]:
        by_topic.setdefault(lead["topic"], {}).setdefault(lead["actor"], 0)
        by_topic[lead["topic"]][lead["actor"]] += 1
    for t in state["topics"]:
        spread = ", ".join(f"{a}: {n}" for a, n in sorted(by_topic.get(t["name"], {}).items()))
        topics.add_row(t["name"], str(t["partitions"]), "yes" if t["internal"] else "", spread or "[red]none[/]")
    console.print(topics)
    groups = Table(title="groups")
    for col in ("type", "state", "groups"):
        groups.add_column(col)
    for group_type, by_state in sorted(state.get("groups", {}).items()):
        for group_state, count in sorted(by_state.items()):
            groups.add_row(group_type, group_state, str(count))
    if state.get("groups_error"):
        groups.add_row("", f"[yellow]unknown: {state['groups_error']}[/]", "")
    elif not state.get("groups"):
        groups.add_row("", "none yet", "0")
    console.print(groups)
    share_partitions = [sp for a in actor_list for sp in a.get("share_partitions") or []]
    if share_partitions:
        console.print(share_partitions_table(share_partitions))
    if state["events"]:
        events = Table(title="recent events")
        events.add_column("time")
        events.add_column("event")
        events.add_column("detail")
        for e in state["events"][-10:]:
            events.add_row(time.strftime("%H:%M:%S", time.localtime(e["time"])), e["kind"], e["message"])
        console.print(events)


def settings_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="settings (--config name=value, --config-file server.properties)")
    table.add_column("name", no_wrap=True)
    table.add_column("default", overflow="fold", max_width=24)  # the protocol map's default is long
    table.add_column("range", overflow="fold", max_width=24)
    table.add_column("meaning", overflow="fold")
    for row in rows:
        table.add_row(row["name"], row["default"], row["range"], row["meaning"])
    return table
