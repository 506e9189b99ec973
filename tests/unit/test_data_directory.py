"""A data directory's identity (meta.properties, KIP-858's directory id): made once, kept, and a
damaged one is refused rather than replaced."""

from __future__ import annotations

import uuid

import pytest

from cluster.log.data_directory import META_NAME, DataDirectoryError, directory_id


def test_the_first_use_writes_an_id_and_every_later_one_reads_it(tmp_path):
    root = tmp_path / "data"
    first = directory_id(root)
    assert isinstance(first, uuid.UUID)
    assert directory_id(root) == first
    assert (root / META_NAME).read_text() == f"version=1\ndirectory.id={first}\n"


def test_a_wiped_directory_gets_a_new_id(tmp_path):
    first = directory_id(tmp_path / "a")
    (tmp_path / "a" / META_NAME).unlink()
    assert directory_id(tmp_path / "a") != first


@pytest.mark.parametrize("text", ["garbage", "version=2\ndirectory.id=00000000-0000-0000-0000-000000000001\n",
                                  "version=1\ndirectory.id=not-a-uuid\n", "version=1\n"])
def test_a_damaged_identity_is_refused_and_left_as_it_is(tmp_path, text):
    (tmp_path / META_NAME).write_text(text)
    with pytest.raises(DataDirectoryError, match="not a raygroups data directory identity"):
        directory_id(tmp_path)
    assert (tmp_path / META_NAME).read_text() == text


def test_a_write_cut_short_leaves_no_identity_and_the_next_start_makes_one(tmp_path):
    (tmp_path / (META_NAME + ".tmp")).write_text("version=1\ndirectory.id=")
    made = directory_id(tmp_path)
    assert directory_id(tmp_path) == made


def _identity_of(root: str) -> str:
    return str(directory_id(root))


def test_actors_starting_together_on_one_node_all_get_the_one_id(tmp_path):
    """Every actor on a node reads the identity at start; those that find it missing at once must
    not each write their own (a rename would let the last one replace what the first returned)."""
    from concurrent.futures import ProcessPoolExecutor

    for attempt in range(5):
        root = tmp_path / f"data{attempt}"
        with ProcessPoolExecutor(4) as pool:
            ids = list(pool.map(_identity_of, [str(root)] * 8))
        assert len(set(ids)) == 1
        assert ids[0] == str(directory_id(root))
        assert [p.name for p in root.iterdir()] == [META_NAME]  # no temporary file left behind
