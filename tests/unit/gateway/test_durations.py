"""Kafka's int32 millisecond fields reach the handlers as timedeltas (kio); one helper turns them
back, exactly: a copy that multiplied float seconds by 1000 and truncated waited 1000 ms for a
Fetch's max_wait of 1001."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from cluster.gateway.handlers.common import ms


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_every_int32_millisecond_value_comes_back_exactly(value):
    assert ms(timedelta(milliseconds=value)) == value


def test_the_values_float_arithmetic_got_wrong_and_plain_ints():
    assert [ms(timedelta(milliseconds=v)) for v in (1001, 1003, 4097, 30_001)] == [1001, 1003, 4097, 30_001]
    assert ms(-1) == -1 and ms(500) == 500
