"""What the report's pipeline found: the input of the plots and the page."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadtest.report.facts import RunFacts, TimeAxis
from loadtest.report.faults import Fault
from loadtest.report.tables import Table


@dataclass
class Results:
    """What the pipeline found: the input of the plots and the page."""

    facts: RunFacts
    axis: TimeAxis
    counts: dict[str, Any]
    faults: list[Fault]
    classic_groups: set[str]  # the groups that rebalance: classic and consumer-protocol (KIP-848) ones
    share_groups: dict[str, list[str]]  # share group -> topics
    tables: dict[str, Table] = field(default_factory=dict)

    def add(self, table: Table) -> Table:
        self.tables[table.name] = table
        return table
