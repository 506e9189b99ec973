"""Failover experiments: scenarios, the runner, faults, the event log (docs/experiments.md)."""
