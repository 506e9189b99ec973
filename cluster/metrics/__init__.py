"""Prometheus metrics (issue 13), by concept:

- registry.py: each actor process's own counters and histograms (plain adds, no I/O, no locks);
- names.py: every metric's name, type, help and the Kafka metric it stands for;
- rebalances.py: group rebalances, derived from groups observed before and after an operation;
- collect.py: actors' snapshots turned into Prometheus metric families;
- endpoint.py: the driver's HTTP endpoint that gathers the snapshots on each scrape.
"""
