"""Thin drivers that run the sans-I/O members (loadtest/members/) on an event loop: asyncio for
experiments and benchmarks, gevent for locust. They move bytes and time; the members decide."""
