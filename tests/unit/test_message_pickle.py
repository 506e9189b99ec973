"""Every request and response type that crosses Ray pickles as its class and a tuple of its fields
(kernel.message), and comes back equal."""

import dataclasses
import enum
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ray import cloudpickle

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


# -- flat messages: the whole tree as one tuple of plain values ---------------------------------------


class _Color(enum.IntEnum):
    RED = 1
    BLUE = 2


@message(flat=True)
class _Leaf:
    n: int
    color: _Color


@message(flat=True, frozen=False)
class _Tree:
    name: str
    color: _Color
    maybe: _Color | None
    leaves: tuple[_Leaf, ...] = ()
    one: _Leaf | None = None
    other: object = None


def _plain(value) -> bool:
    if isinstance(value, tuple):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (int, str, bytes, float)) and not isinstance(value, enum.Enum)


@given(st.text(), st.sampled_from(_Color), st.none() | st.sampled_from(_Color),
       st.lists(st.tuples(st.integers(), st.sampled_from(_Color)), max_size=4), st.booleans())
def test_a_flat_tree_round_trips_through_pickle_and_cloudpickle(name, color, maybe, leaves, one) -> None:
    tree = _Tree(name, color, maybe, tuple(_Leaf(n, c) for n, c in leaves), _Leaf(7, _Color.RED) if one else None)
    for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, cloudpickle.loads)):
        back = loads(dumps(tree))
        assert back == tree and type(back.color) is _Color and all(type(x) is _Leaf for x in back.leaves)


def test_a_flat_message_reduces_once_for_its_whole_tree_to_plain_values() -> None:
    tree = _Tree("t", _Color.RED, None, (_Leaf(1, _Color.BLUE), _Leaf(2, _Color.RED)), _Leaf(3, _Color.BLUE))
    rebuild, (values,) = tree.__reduce__()
    assert _plain(values), values  # enums as their values, nested messages as tuples
    assert rebuild is _Tree._message_rebuild  # pickled by reference, found on the class
    tree.name = "changed"  # frozen=False: an answer the leader fills in
    assert pickle.loads(pickle.dumps(tree)).name == "changed"


def test_the_values_that_cross_ray_on_every_fetch_are_flat_messages() -> None:
    from cluster.partition import FetchOutcome, ProduceOutcome
    from cluster.share.requests import ShareFetchCall, ShareItem, ShareOutcome
    from sharestate.state_batches import AcknowledgementBatch, AcquiredRecords

    for cls in (FetchOutcome, ProduceOutcome, ShareFetchCall, ShareItem, ShareOutcome, AcknowledgementBatch, AcquiredRecords):
        assert hasattr(cls, "_message_rebuild"), cls
