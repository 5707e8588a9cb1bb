"""Which character separates a CSV file's fields: a comma, or a semicolon or a bar.

Files called CSV are often not comma-separated: spreadsheets set to a locale with a
decimal comma write ``;``, and many exports use ``|``. Read with a comma, such a
file loads as one column, every row keyless. :func:`delimiter` looks at the first
records of the file (its head, as the readers peek it) the way DuckDB's sniffer
does, more strictly: a candidate fits when it splits every one of those records
(quotes honoured) into the same number of fields, at least two. A comma wins
whenever it fits; else the first of the others that fits; else a comma (the file
is read as before, and its errors say which row is wrong).
"""

from __future__ import annotations

import csv
import io

__all__ = ["CANDIDATES", "delimiter"]

#: the separators tried, the first preferred
CANDIDATES = (",", ";", "|")
#: records looked at (at most: those the head holds whole)
_RECORDS = 50
_BOM = "\ufeff"


def delimiter(head: bytes, complete: bool) -> str:
    """The field separator of a CSV text whose first bytes are ``head`` (``complete``:
    the whole text; else its last line may be cut short, and is not looked at)."""
    text = head.decode("utf-8", errors="replace").removeprefix(_BOM)
    if not complete:
        text = text[: text.rfind("\n") + 1]
    for candidate in CANDIDATES:
        if _fits(text, candidate):
            return candidate
    return ","


def _fits(text: str, candidate: str) -> bool:
    counts = set()
    try:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=candidate, strict=True)
        for i, record in enumerate(reader):
            if i == _RECORDS:
                break
            if record:  # a blank line is no record
                counts.add(len(record))
    except csv.Error:
        return False
    return len(counts) == 1 and counts.pop() >= 2
