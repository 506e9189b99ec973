import uuid

from coordinator.hashing import group_partition, java_string_hash, kafka_abs, kafka_uuid_str, share_state_partition


def test_java_string_hash_matches_java():
    # Values from Java's String.hashCode().
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    # Characters outside the BMP hash as two UTF-16 code units, as in Java.
    assert java_string_hash("\U0001F600") == 31 * 0xD83D + 0xDE00


def test_kafka_abs_maps_min_int_to_zero():
    assert kafka_abs(-(1 << 31)) == 0
    assert kafka_abs(-5) == 5


def test_group_partition_for_min_int_hash_is_zero():
    assert group_partition("polygenelubricants", 50) == 0
    assert group_partition("hello", 50) == 99162322 % 50


def test_share_state_key_uses_kafka_uuid_form():
    topic_id = uuid.UUID("c3d9a0d4-4b2d-4a4e-8c1e-0f8f5b3f2a10")
    text = kafka_uuid_str(topic_id)
    assert len(text) == 22 and "=" not in text
    expected = kafka_abs(java_string_hash(f"g:{text}:3")) % 50
    assert share_state_partition("g", topic_id, 3, 50) == expected
