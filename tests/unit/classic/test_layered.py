"""LayeredDict and LayeredSet behave as a dict and a set (order included), and a copy is independent
of its original whatever either does later (coordinator/classic/layered.py)."""

from __future__ import annotations

import copy
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.classic.layered import LayeredDict, LayeredSet

KEYS = st.integers(0, 40)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), KEYS, st.integers()),
        st.tuples(st.just("pop"), KEYS, st.none()),
        st.tuples(st.just("copy"), st.none(), st.none()),
        st.tuples(st.just("clear"), st.integers(0, 9), st.none()),  # clears 1 in 10
    ),
    max_size=300,
)


def _same(layered: LayeredDict, plain: dict) -> None:
    assert list(layered.items()) == list(plain.items())
    assert list(layered) == list(plain) and list(layered.values()) == list(plain.values())
    assert len(layered) == len(plain) and layered == plain
    for key in range(41):
        assert (key in layered) == (key in plain)
        assert layered.get(key, "none") == plain.get(key, "none")


@settings(max_examples=300, deadline=None)
@given(OPS, st.booleans())
def test_a_layered_dict_is_a_dict_and_its_copies_are_independent(ops, start_full):
    plain = {k: -k for k in range(30)} if start_full else {}
    layered = LayeredDict(plain)
    older: list[tuple[LayeredDict, dict]] = []
    for op, key, value in ops:
        if op == "set":
            layered[key] = value
            plain[key] = value
        elif op == "pop":
            assert layered.pop(key, "none") == plain.pop(key, "none")
        elif op == "clear" and key == 0:
            layered.clear()
            plain.clear()
        elif op == "copy":
            # The original goes on being changed below; the copy is frozen as it was.
            older.append((layered, dict(plain)))
            layered = layered.copy()
        _same(layered, plain)
    for frozen, expected in older:
        _same(frozen, expected)


def test_a_key_removed_and_added_again_goes_last_as_in_a_dict():
    layered = LayeredDict({"a": 1, "b": 2, "c": 3})
    layered = layered.copy()
    del layered["a"]
    layered["d"] = 4
    layered["a"] = 5
    layered["b"] = 6
    assert list(layered.items()) == [("b", 6), ("c", 3), ("d", 4), ("a", 5)]


def test_missing_keys_raise_as_in_a_dict():
    layered = LayeredDict({"a": 1}).copy()
    del layered["a"]
    for action in (lambda: layered["a"], lambda: layered.pop("a"), lambda: layered.__delitem__("z")):
        try:
            action()
        except KeyError:
            continue
        raise AssertionError("no KeyError")


def test_copies_pickle_and_deepcopy_as_plain_contents():
    layered = LayeredDict({"a": [1]}).copy()
    layered["b"] = [2]
    deep = copy.deepcopy(layered)
    deep["a"].append(9)
    assert layered == {"a": [1], "b": [2]} and deep == {"a": [1, 9], "b": [2]}
    assert pickle.loads(pickle.dumps(layered)) == layered
    members = LayeredSet(["x", "y"]).copy()
    members.discard("x")
    members.add("z")
    assert pickle.loads(pickle.dumps(members)) == {"y", "z"} and copy.deepcopy(members) == members


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "discard", "copy"]), KEYS), max_size=200))
def test_a_layered_set_is_a_set(ops):
    plain: set[int] = set()
    layered: LayeredSet[int] = LayeredSet()
    older: list[tuple[LayeredSet, set]] = []
    for op, key in ops:
        if op == "add":
            layered.add(key)
            plain.add(key)
        elif op == "discard":
            layered.discard(key)
            plain.discard(key)
        else:
            older.append((layered, set(plain)))
            layered = layered.copy()
        assert layered == plain and len(layered) == len(plain) and bool(layered) == bool(plain)
        assert sorted(layered) == sorted(plain)
    for frozen, expected in older:
        assert frozen == expected


def test_the_shared_empty_layer_is_never_written_and_compact_keeps_contents():
    from coordinator.classic import layered

    d = layered.LayeredDict({f"m{i}": i for i in range(10)})
    copy = d.copy()
    for i in range(6):
        copy[f"m{i}"] = -i
    copy.pop("m9")
    copy["n"] = 1
    expected = dict(copy.items())
    copy.compact()  # 7 changes >= half of 10: folded
    assert dict(copy.items()) == expected and list(copy) == list(expected) and copy._layer == {}
    assert dict(d.items()) == {f"m{i}": i for i in range(10)}  # the original untouched
    s = layered.LayeredSet(["a"]).copy()
    s.add("b")
    s.discard("a")
    assert set(s) == {"b"}
    assert layered._NO_CHANGES == {}
