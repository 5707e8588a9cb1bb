"""The CSV field separator found from a file's head: a comma unless every record
splits evenly by ``;`` or ``|`` instead (:mod:`limno.data.csv_dialect`)."""

from __future__ import annotations

import csv
import io
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from limno.data.csv_dialect import CANDIDATES, delimiter
from limno.data.readers import read_table


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("a,b\n1,2\n", ","),
        ("a;b\n1;2\n", ";"),
        ("a|b\n1|2\n", "|"),
        ("id;price\n1;2,50\n2;3\n", ";"),  # decimal commas: the comma splits unevenly
        ('a;b\n"x;y";2\n', ";"),  # a quoted separator is text
        ("a,b\n1;2,x\n", ","),  # the comma fits: it wins
        ("name\nann\n", ","),  # one column: nothing splits it
        ("a;b\n1;2;3\n", ","),  # nothing fits: read as before (its error names the row)
        ("\ufeffa;b\n1;2\n", ";"),  # a byte order mark
        ("a;b\n\n1;2\n", ";"),  # a blank line is no record
        ('a,b\n"open,1\n', ","),  # a quote left open: not a fit
    ],
)
def test_the_separator_that_splits_every_record_evenly(text: str, want: str) -> None:
    assert delimiter(text.encode(), True) == want


def test_a_cut_last_line_is_not_looked_at() -> None:
    head = b"a;b\n1;2\n3;4;5;6"  # the head of a longer file: its last line cut short
    assert delimiter(head, False) == ";"
    assert delimiter(head, True) == ","  # whole, that line is a record that does not fit


_TEXT = st.text(st.sampled_from('abcxyz "'), min_size=1, max_size=6).map(lambda t: "v" + t)


@given(
    separator=st.sampled_from(CANDIDATES),
    columns=st.integers(2, 5),
    data=st.data(),
)
def test_a_file_written_with_a_separator_reads_back_whole(
    separator: str, columns: int, data: st.DataObject
) -> None:
    """What Python's csv writer writes with each separator (its fields may hold the
    separator, then quoted, and quotes) is read back as the same table."""
    names = [f"c{i}" for i in range(columns)]
    cell = _TEXT | _TEXT.map(lambda t: t + separator)
    rows = data.draw(st.lists(st.lists(cell, min_size=columns, max_size=columns), min_size=1))
    out = io.StringIO(newline="")
    writer = csv.writer(out, delimiter=separator, lineterminator="\n")
    writer.writerow(names)
    writer.writerows(rows)
    raw = out.getvalue().encode()
    assert delimiter(raw, True) == separator
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.csv"
        path.write_bytes(raw)
        got = read_table(str(path), "csv").to_pylist()
    assert got == [dict(zip(names, r, strict=True)) for r in rows]


def test_the_files_page_preview_splits_the_same_way() -> None:
    from limno.ui.routes_files import _csv_rows

    head = b"id;price\n1;2,50\n2;3,00\n3;4,"  # the first bytes of a bigger object
    assert _csv_rows(head, True).to_pylist() == [
        {"id": 1, "price": "2,50"},
        {"id": 2, "price": "3,00"},
    ]
