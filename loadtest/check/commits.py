"""nonmonotonic-commit: a classic group's committed offset of a partition moved backwards.

Two ways to see it: an answered commit below one answered before it (commits are judged in the
order their responses arrived), or a start position read back from the committed offset
(`position` with source `committed`) below the highest commit answered before it was asked for.
"""

from __future__ import annotations

from loadtest.check.history import asked_at, successful_commits
from loadtest.check.rundata import RunData
from loadtest.check.verdict import Evidence, Verdict, judged, not_applicable, plural

NAME = "nonmonotonic-commit"
TITLE = "committed offsets never moved backwards"


def nonmonotonic_commit(run: RunData) -> Verdict:
    commits = successful_commits(run)
    read_back = [r for r in run.rows("position") if r["detail"].get("source") == "committed"]
    if not commits and not read_back:
        return not_applicable(NAME, TITLE, "no offset was committed or read back")
    evidence = Evidence()
    violations = 0
    committed = 0
    for history in commits.values():
        highest = None
        for row in history.rows:
            committed += 1
            if highest is not None and row["offset"] < highest["offset"]:
                violations += 1
                evidence.add(f"committed {row['offset']} after a commit of {highest['offset']} was answered",
                             highest, row)
            elif highest is None or row["offset"] > highest["offset"]:
                highest = row
    for row in read_back:
        history = commits.get((row["group"], row["topic"], row["partition"]))
        best = history.highest_before(asked_at(row)) if history is not None else None
        if best is not None and row["offset"] < best["offset"]:
            violations += 1
            evidence.add(f"read back {row['offset']} after a commit of {best['offset']} was answered", best, row)
    checked = committed + len(read_back)
    if violations:
        summary = f"{violations:,} of {checked:,} commits and read-back positions went backwards"
    else:
        summary = (f"{plural(committed, 'answered commit')} and {plural(len(read_back), 'position')} "
                   f"read back from them, all monotonic")
    return judged(NAME, TITLE, checked, violations, evidence, summary)
