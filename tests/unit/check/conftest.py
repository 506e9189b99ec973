from __future__ import annotations

import pytest

from tests.unit.check.runbuilder import RunBuilder, clean_run


@pytest.fixture
def builder() -> RunBuilder:
    """A fresh clean run to plant an anomaly into (building one takes a millisecond)."""
    return clean_run()
