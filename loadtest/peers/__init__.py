"""Peers the benchmarks measure raygroups against in the same run: real brokers (tansu) and the
do-nothing responder."""
