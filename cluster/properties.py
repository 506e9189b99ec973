"""Java's properties file syntax (java.util.Properties.load), which Kafka's server.properties uses.

Natural lines end at \\n, \\r or \\r\\n; a line ending in an odd number of backslashes continues
on the next one, whose leading whitespace is dropped. A line whose first non-blank character is
`#` or `!` is a comment (and never continues). The key ends at the first unescaped `=`, `:` or
whitespace; blanks and one `=`/`:` after it are skipped. Escapes: \\t \\n \\r \\f, \\uXXXX, and a
backslash before any other character stands for that character. The last of repeated keys wins.
"""

from __future__ import annotations

import re

_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_NATURAL_LINES = re.compile(r"\r\n|\r|\n")


class PropertiesError(ValueError):
    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


def read_properties_text(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for lineno, logical in _logical_lines(text):
        key, value = _split(logical, lineno)
        out[key] = value
    return out


def _logical_lines(text: str):
    """(first line number, logical line with continuations joined, escapes still in it)."""
    natural = _NATURAL_LINES.split(text)
    i = 0
    while i < len(natural):
        start = i
        line = natural[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while _continues(line) and i < len(natural):
            parts.append(line[:-1])
            line = natural[i].lstrip(_BLANK)
            i += 1
        if _continues(line):  # a trailing backslash on the last line of the file continues into nothing
            line = line[:-1]
        parts.append(line)
        yield start + 1, "".join(parts)


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split(logical: str, lineno: int) -> tuple[str, str]:
    i, n = 0, len(logical)
    while i < n:
        c = logical[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _BLANK:
            break
        i += 1
    key_end = min(i, n)
    j = key_end
    while j < n and logical[j] in _BLANK:
        j += 1
    if j < n and logical[j] in "=:":
        j += 1
        while j < n and logical[j] in _BLANK:
            j += 1
    return _unescape(logical[:key_end], lineno), _unescape(logical[j:], lineno)


def _unescape(text: str, lineno: int) -> str:
    if "\\" not in text:
        return text
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:
            break  # a lone trailing backslash: Java drops it
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesError(lineno, f"malformed \\uXXXX escape {text[i:i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return _join_surrogates("".join(out))


def _join_surrogates(text: str) -> str:
    # \uD83D\uDE00 is one character in Java's UTF-16 strings; in Python, the pair is joined here.
    if not any("\ud800" <= ch <= "\udfff" for ch in text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
