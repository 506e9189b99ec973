"""Simulated Kafka clients as sans-I/O state machines (after h11): fed responses and clock ticks,
they return the requests to send and what they observed. Drivers in loadtest/drivers/ run them
on asyncio (experiments, benchmarks) and on gevent (locust), with one copy of the protocol logic.
"""
