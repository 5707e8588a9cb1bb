"""What a new user tried on the CLI and got a silent wrong answer or an error line that
did not say what was wrong with what they typed; each runs on a lake's path and through
a server (``mode``)."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from clirunner import fail, ok
from git_scenarios import Lk, error_line


def test_a_negative_log_count_is_an_error_not_an_empty_log(lk: Lk) -> None:
    """``log -n -1`` printed nothing and exited 0 (``scan --limit -1`` already failed)."""
    lk.ok("create", "logs", "-k", "ts")
    lk.load("logs", [1])
    assert "limit must not be negative" in error_line(lk.fail("log", "-p", "logs", "-n", "-1"))
    assert ok("--lake", lk.lake, "log", "-p", "logs", "-n", "0").out == b""
    assert len(ok("--lake", lk.lake, "log", "-p", "logs", "-n", "1").rows()) == 1


def test_refusals_say_what_was_wrong_with_what_was_typed(lk: Lk) -> None:
    """An empty key made a pool keyed on ts; a branch name with '..' was told to use
    letters, digits, '_', '.', '-', which it did; ``main~5`` was named by commit id."""
    r = fail("--lake", lk.lake, "create", "keyed", "-k", "")
    assert "invalid pool key ''" in error_line(r)
    assert "keyed" not in [p["name"] for p in ok("--lake", lk.lake, "ls").rows()]
    lk.ok("create", "logs", "-k", "ts")
    assert "no '..'" in error_line(lk.fail("branch", "-p", "logs", "a..b"))
    line = error_line(lk.fail("scan", "-p", "logs@main~5"))
    assert "main~5: history has only 0 ancestor(s)" in line


def test_a_write_to_a_tag_or_a_past_commit_says_so(forked: Lk) -> None:
    """``load -p logs@v1`` said only "branch 'v1' not found", as if v1 did not exist."""
    lk = forked
    lk.ok("tag", "-p", "logs", "v1")
    data = lk.file([{"ts": 9}])
    line = error_line(lk.fail("load", "-p", "logs@v1", data))
    assert "branch 'v1' not found ('v1' is a tag; a write goes to a branch)" in line
    line = error_line(lk.fail("merge", "dev", "-p", "logs", "--into", "v1"))
    assert "'v1' is a tag" in line
    line = error_line(lk.fail("load", "-p", "logs@main~1", data))
    assert "a ref with '~' names a past commit" in line
    line = error_line(lk.fail("compact", "-p", "logs@v1"))  # was: nothing to compact, exit 0
    assert "branch 'v1' not found ('v1' is a tag; a write goes to a branch)" in line
    assert lk.ts("logs") == [1, 2, 3]


def test_csv_output_of_bytes_and_extension_types(lk: Lk) -> None:
    """Bytes that are not UTF-8 and a UUID column (as DuckDB writes them) were an
    internal error of ``-f csv``; bytes that are UTF-8 came out raw (NUL bytes in a CSV)."""
    data = lk.tmp / "odd.parquet"
    odd = {
        "ts": [1, 2],
        "raw": pa.array([b"\x00\xff", None]),
        "id": pa.array([uuid.UUID(int=1).bytes, None], pa.uuid()),
        "took": pa.array([1500, None], pa.duration("ms")),
    }
    pq.write_table(pa.table(odd), data)
    lk.ok("create", "odd", "-k", "ts")
    lk.ok("load", "-p", "odd", str(data))
    text = lk.ok("-f", "csv", "scan", "-p", "odd").text
    assert text.splitlines() == [
        '"ts","raw","id","took"',
        '1,"AP8=","00000000-0000-0000-0000-000000000001","1.5"',
        "2,,,",
    ]


def test_uploading_a_missing_file_to_a_path_names_it(lk: Lk) -> None:
    """``fs upload nosuch POOL/PATH`` was an internal error (FileNotFoundError)."""
    lk.ok("create", "imgs", "--kind", "files")
    missing = str(lk.tmp / "nosuch.png")
    line = error_line(lk.fail("fs", "upload", missing, "imgs/a.png"))
    assert line == f"error: {missing}: no such file or directory"
    assert lk.ok("fs", "uncommitted", "imgs").out == b""


def test_nanosecond_times_of_day_keep_their_digits(lk: Lk) -> None:
    """A ``time64[ns]`` of 1 ns came out as ``00:00:00`` (Python's time has microseconds)."""
    data = lk.tmp / "times.parquet"
    pq.write_table(pa.table({"ts": [1], "at": pa.array([1], pa.time64("ns"))}), data)
    lk.ok("create", "times", "-k", "ts")
    lk.ok("load", "-p", "times", str(data))
    assert lk.ok("scan", "-p", "times").rows() == [{"ts": 1, "at": "00:00:00.000000001"}]
    table = lk.ok("-f", "table", "scan", "-p", "times").text.splitlines()
    assert table[1].split() == ["1", "00:00:00.000000001"]
