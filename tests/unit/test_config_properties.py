"""Java properties syntax, as java.util.Properties.load reads Kafka's server.properties."""

import pytest

from cluster.config import ConfigError, read_properties
from cluster.properties import PropertiesError, read_properties_text


def test_separators_and_blanks():
    text = "a=1\nb: 2\nc 3\nd\t=\t4\n  e  =  five  \nf\ng==x\nh=:y\n"
    assert read_properties_text(text) == {
        "a": "1", "b": "2", "c": "3", "d": "4", "e": "five  ", "f": "", "g": "=x", "h": ":y",
    }


def test_comments_with_hash_or_bang_and_never_continued():
    text = "# a comment \\\nx=1\n  ! another\n#y=2\n"
    assert read_properties_text(text) == {"x": "1"}


def test_continuation_lines_drop_leading_blanks():
    text = "listeners=PLAINTEXT://:9092,\\\n    CONTROLLER://:9093\nnext=1\n"
    assert read_properties_text(text) == {"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "next": "1"}


def test_an_even_number_of_backslashes_does_not_continue():
    assert read_properties_text("path=C:\\\\\nother=2") == {"path": "C:\\", "other": "2"}


def test_escapes_in_keys_and_values():
    text = "key\\ with\\=odd\\:chars=v\nt=a\\tb\\nc\nu=caf\\u00e9 \\u2603\nq=\\q\nsmile=\\uD83D\\uDE00\n"
    assert read_properties_text(text) == {
        "key with=odd:chars": "v", "t": "a\tb\nc", "u": "café ☃", "q": "q", "smile": "😀",
    }


def test_every_line_terminator():
    assert read_properties_text("a=1\r\nb=2\rc=3\n") == {"a": "1", "b": "2", "c": "3"}


def test_the_last_repeated_key_wins():
    assert read_properties_text("a=1\na=2\n") == {"a": "2"}


def test_a_malformed_unicode_escape_is_one_line_with_its_line():
    with pytest.raises(PropertiesError, match="line 2: malformed"):
        read_properties_text("a=1\nb=\\u12G4\n")


def test_file_errors_name_the_file_and_line(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("a=1\nb=\\uZZZZ\n")
    with pytest.raises(ConfigError, match=r"server.properties:2: malformed"):
        read_properties(f)
    with pytest.raises(ConfigError, match="cannot read config file"):
        read_properties(tmp_path / "missing.properties")


def test_latin1_files_are_read_as_java_does(tmp_path):
    f = tmp_path / "server.properties"
    f.write_bytes("name=caf\xe9\n".encode("latin-1"))
    assert read_properties(f) == {"name": "café"}
