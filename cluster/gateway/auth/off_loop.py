"""Authentication work off the gateway's event loop (issue 21).

A SASL/PLAIN password is checked by running PBKDF2 over it (thousands of HMACs), and every exchange
reads the credential store; on the event loop, four threads guessing passwords raised every other
client's p50 from 0.4 to 3.9 ms. Exchanges run on a small pool of threads instead (hashlib releases
the GIL while it hashes), so guesses queue behind each other and not in front of other clients'
requests. Kafka runs authentication on its network threads, whose pool is separate from the
request handlers'; two threads bound what guessers can take of a gateway's CPU.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

THREADS = 2
_pool: ThreadPoolExecutor | None = None


def run(work: Callable[..., Any], *args: Any) -> asyncio.Future:
    """work(*args) on an authentication thread; await the result on the running loop."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="sasl")
    return asyncio.get_running_loop().run_in_executor(_pool, work, *args)
