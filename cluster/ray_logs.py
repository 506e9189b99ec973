"""Where Ray keeps this session's logs, for the one line `raygroups up` prints when a start fails
(the actors' tracebacks are there, not on the terminal)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def ray_log_dir() -> Path:
    try:
        import ray._private.worker as worker

        node = getattr(worker, "_global_node", None)
        if node is not None:
            return Path(node.get_session_dir_path()) / "logs"
    except Exception:  # Ray gone or changed: fall back to where it writes by default
        pass
    root = os.environ.get("RAY_TMPDIR") or ("/tmp" if os.name == "posix" else tempfile.gettempdir())
    return Path(root) / "ray" / "session_latest" / "logs"
