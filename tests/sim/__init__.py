"""Deterministic simulation of the coordinators (FoundationDB's idea, ARCHITECTURE.md).

One seed drives everything: client requests, clock jumps, completed and failed disk writes, and
crash-and-reload of the partition, all on one asyncio loop whose I/O finishes only when the
schedule says so. After every step the invariants are checked; a failure names its seed, and
`python -m tests.sim --seed N -v` replays it exactly.
"""
