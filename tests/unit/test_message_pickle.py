"""Every request and response type that crosses Ray pickles as its class and a tuple of its fields
(kernel.message), and comes back equal."""

import dataclasses
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

import coordinator.classic.messages as classic
import coordinator.share.messages as share
import sharestate.messages as sharestate
from kernel.message import message

MESSAGE_TYPES = [
    cls
    for module in (classic, share, sharestate)
    for cls in vars(module).values()
    if isinstance(cls, type) and cls.__module__ == module.__name__ and dataclasses.is_dataclass(cls)
]


def test_every_message_type_is_a_message() -> None:
    assert len(MESSAGE_TYPES) > 40
    for cls in MESSAGE_TYPES:
        assert cls.__dataclass_params__.frozen, cls
        assert "__reduce__" in vars(cls), f"{cls.__name__} pickles through dataclasses' generic state"


@message
class _Three:
    a: int
    b: str | None
    c: tuple = ()


@message
class _One:
    a: object


@message
class _Empty:
    pass


@given(st.integers(), st.none() | st.text(), st.tuples(st.integers(), st.binary()))
def test_round_trip_equal(a: int, b: str | None, c: tuple) -> None:
    value = _Three(a, b, c)
    assert pickle.loads(pickle.dumps(value)) == value
    assert value.__reduce__() == (_Three, (a, b, c))


def test_one_field_and_none() -> None:
    nested = _One(_Three(1, None))
    assert pickle.loads(pickle.dumps(nested)) == nested
    assert nested.__reduce__() == (_One, (_Three(1, None),))
    assert pickle.loads(pickle.dumps(_Empty())) == _Empty()


def test_still_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        _Three(1, "x").a = 2  # type: ignore[misc]


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=lambda c: c.__name__)
def test_real_messages_round_trip(cls: type) -> None:
    # Fields filled with placeholders of no particular type: pickling does not look at them.
    value = cls(*[f"v{i}" for i, _ in enumerate(dataclasses.fields(cls))])
    assert pickle.loads(pickle.dumps(value)) == value
