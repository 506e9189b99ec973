"""The only code that calls actors: one client per actor kind, over the router's batched Ray calls.

A client owns how a call travels (batching per actor and loop tick, streaming for calls that
park, retries while a partition moves, fan-out over partitions or actors) and answers in the
types of cluster/calls/, so that handlers translate Kafka requests and never touch Ray.
"""
