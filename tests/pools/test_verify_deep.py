"""``verify`` after vacuum and damage: missing objects on heads are faults whatever a
tombstone says; ``--deep`` reads every object whole and checks its page checksums."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from clirunner import fail, ok
from limno.api.local import LocalLake as Lake
from limno.core.gc import expired_path
from limno.data.objects import data_path


def _lake(tmp_path: Path) -> tuple[Lake, str]:
    where = str(tmp_path / "lake")
    lake = Lake.init(where)
    pool = lake.create_pool("p", key="k")
    pool.load([pa.table({"k": list(range(5000)), "v": [f"value-{i}" for i in range(5000)]})])
    return lake, where


def test_a_head_object_missing_is_a_fault_even_with_a_tombstone(tmp_path: Path) -> None:
    lake, where = _lake(tmp_path)
    pool = lake.pool("p")
    (obj,) = pool.snapshot()[0]
    lake.storage.put(expired_path(pool.id, obj.id), b"")  # as if vacuum had removed it
    os.unlink(os.path.join(where, data_path(pool.id, obj.id)))
    err = fail("--lake", where, "verify").err
    assert "a branch, tag or retained commit holds it" in err and "to fix:" in err
    assert obj.id in err


def test_trimmed_history_may_lose_objects_untrimmed_may_not(tmp_path: Path) -> None:
    lake, where = _lake(tmp_path)
    pool = lake.pool("p")
    (old,) = pool.snapshot()[0]
    pool.delete_objects([old.id])
    pool.load([pa.table({"k": [1], "v": ["new"]})])
    # history still holds the old object: vacuum keeps it, verify is clean
    assert pool.vacuum(grace=dt.timedelta(0)).removed == []
    ok("--lake", where, "verify")
    # a retention window trims history: vacuum removes it, which verify accepts
    report = pool.vacuum(grace=dt.timedelta(0), retention=dt.timedelta(0))
    assert [p for p, _ in report.removed] == [data_path(pool.id, old.id)]
    assert pool.versioned.gc.state().trimmed
    ok("--lake", where, "verify")
    # but a branch made from that history is refused: its objects are gone
    first = pool.log()[-2].id
    err = fail("--lake", where, "branch", "-p", "p", "back", "--from", first).err
    assert "removed by vacuum" in err and "back" not in pool.branches()


def _flip_page_byte(path: str) -> None:
    """Flip one byte inside the first data page, leaving size and footer intact."""
    meta = pq.ParquetFile(path).metadata
    col = meta.row_group(0).column(1)
    start = col.data_page_offset
    at = start + (col.total_compressed_size // 2)
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_deep_verify_finds_a_flipped_byte_by_its_page_checksum(tmp_path: Path) -> None:
    lake, where = _lake(tmp_path)
    pool = lake.pool("p")
    (obj,) = pool.snapshot()[0]
    path = os.path.join(where, data_path(pool.id, obj.id))
    _flip_page_byte(path)
    ok("--lake", where, "verify")  # size and footer unchanged: the quick check passes
    err = fail("--lake", where, "verify", "--deep").err
    assert obj.id in err and "to fix:" in err
    assert "error: 1 fault(s)" in err


def test_deep_verify_is_clean_on_a_sound_lake(tmp_path: Path) -> None:
    lake, where = _lake(tmp_path)
    lake.pool("p").load([pa.table({"k": [7, 3], "v": ["x", "y"]})])
    lake.pool("p").compact()
    ok("--lake", where, "verify", "--deep")
    assert list(lake.verify(deep=True)) == []
