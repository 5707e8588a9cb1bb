"""pyarrow's own S3 filesystem (``pyarrow.fs.S3FileSystem``, the AWS C++ SDK), unchanged,
against the S3 gateway: a partitioned Parquet dataset written onto a branch, listed
and read back; committed and tagged with ``limno``; read at the tag after the branch
moved on. Also its streams (a 12 MB upload goes up in parts), copies, moves and
deletes."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from gateway.clients_support import REGION, Gateway, limno, plain

__all__ = ["plain"]  # fixtures

MIB = 1 << 20


def filesystem(gateway: Gateway) -> pafs.S3FileSystem:
    key_id, secret = gateway.key
    host = gateway.url.split("://", 1)[1]
    return pafs.S3FileSystem(
        endpoint_override=host,
        scheme="http",
        access_key=key_id,
        secret_key=secret,
        region=REGION,
    )


def table(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "day": [f"2026-11-{1 + i % 3:02}" for i in ids],
            "value": [i * 0.5 for i in ids],
            "name": [f"row {i} ✓" for i in ids],
        }
    )


def read(fs: pafs.S3FileSystem, path: str) -> pa.Table:
    got = ds.dataset(path, filesystem=fs, format="parquet", partitioning="hive").to_table()
    return got.select(["id", "day", "value", "name"]).sort_by("id")


def same(got: pa.Table, want: pa.Table) -> bool:
    # the partition column comes back dictionary-encoded: compare values
    return bool(got.to_pylist() == want.sort_by("id").to_pylist())


def test_dataset_branch_commit_tag(plain: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = plain.pool("arrow")
    pool = plain.lake().file_pool(bucket)
    pool.branch("dev")
    fs = filesystem(plain)
    data = table(3000)
    ds.write_dataset(
        data,
        f"{bucket}/dev/events",
        filesystem=fs,
        format="parquet",
        partitioning=["day"],
        partitioning_flavor="hive",
        max_rows_per_file=400,
        max_rows_per_group=400,
    )
    # listed: recursively, and a level at a time (a delimiter listing)
    files = fs.get_file_info(pafs.FileSelector(f"{bucket}/dev/events", recursive=True))
    parquet = sorted(f.path for f in files if f.type == pafs.FileType.File)
    assert len(parquet) == 9  # 3 days x 1,000 rows, 400 a file
    assert all(p.startswith(f"{bucket}/dev/events/day=2026-11-0") for p in parquet)
    top = fs.get_file_info(pafs.FileSelector(f"{bucket}/dev/events"))
    assert sorted((f.base_name, f.type) for f in top) == [
        (f"day=2026-11-0{d}", pafs.FileType.Directory) for d in (1, 2, 3)
    ]
    info = fs.get_file_info(parquet[0])
    assert (
        info.type == pafs.FileType.File
        and info.size == pool.stat(parquet[0].split("/", 2)[2], "dev").size
    )
    assert same(read(fs, f"{bucket}/dev/events"), data)
    # staged on dev until committed; main never saw it
    staged = sorted(c.path for c in pool.uncommitted("dev"))
    # pyarrow also made its directory markers (empty "events/", "events/day=.../")
    assert [p for p in staged if not p.endswith("/")] == [p.split("/", 2)[2] for p in parquet]
    assert [p for p in staged if p.endswith("/")] == ["events/"] + [
        f"events/day=2026-11-0{d}/" for d in (1, 2, 3)
    ]
    assert fs.get_file_info(f"{bucket}/main/events").type == pafs.FileType.NotFound

    limno(plain, monkeypatch, "commit", "-p", f"{bucket}@dev", "-m", "events, by pyarrow")
    limno(plain, monkeypatch, "tag", "-p", bucket, "v1", "--from", "dev")
    assert pool.uncommitted("dev") == []
    assert pool.log("v1")[0].message == "events, by pyarrow"

    # dev moves on: a day dropped, more rows added
    fs.delete_dir(f"{bucket}/dev/events/day=2026-11-01")
    more = table(300, start=3000)
    pq.write_table(more, f"{bucket}/dev/events/day=2026-11-02/late.parquet", filesystem=fs)
    now = read(fs, f"{bucket}/dev/events")
    assert now.num_rows == 2000 + 300 and 0 not in now.column("id").to_pylist()
    # the tag still reads as written
    assert same(read(fs, f"{bucket}/v1/events"), data)
    tagged = fs.get_file_info(pafs.FileSelector(f"{bucket}/v1/events", recursive=True))
    assert sorted(f.path for f in tagged if f.type == pafs.FileType.File) == [
        p.replace("/dev/", "/v1/", 1) for p in parquet
    ]
    # a tag is not a branch: writing there is refused, and changes nothing
    with pytest.raises(OSError, match="ACCESS_DENIED.*read-only"):  # not a branch
        pq.write_table(more, f"{bucket}/v1/events/nope.parquet", filesystem=fs)
    assert fs.get_file_info(f"{bucket}/v1/events/nope.parquet").type == pafs.FileType.NotFound


def test_streams_copy_move_delete(plain: Gateway) -> None:
    bucket = plain.pool("arrowio")
    fs = filesystem(plain)
    payload = os.urandom(12 * MIB + 123)
    with fs.open_output_stream(f"{bucket}/main/blobs/big.bin") as out:
        for i in range(0, len(payload), MIB):  # pyarrow uploads it in parts
            out.write(payload[i : i + MIB])
    pool = plain.lake().file_pool(bucket)
    assert pool.stat("blobs/big.bin", "main").etag.endswith("-2")  # 10 MB parts: 2
    with fs.open_input_file(f"{bucket}/main/blobs/big.bin") as f:
        assert f.size() == len(payload)
        f.seek(5 * MIB)
        assert f.read(100) == payload[5 * MIB : 5 * MIB + 100]
        assert f.read_at(10, len(payload) - 10) == payload[-10:]
    with fs.open_input_stream(f"{bucket}/main/blobs/big.bin") as s:
        assert s.read() == payload

    fs.copy_file(f"{bucket}/main/blobs/big.bin", f"{bucket}/main/copy/big.bin")
    fs.move(f"{bucket}/main/copy/big.bin", f"{bucket}/main/moved/big.bin")
    names = fs.get_file_info(pafs.FileSelector(f"{bucket}/main", recursive=True))
    assert sorted(f.path for f in names if f.type == pafs.FileType.File) == [
        f"{bucket}/main/blobs/big.bin",
        f"{bucket}/main/moved/big.bin",
    ]
    # a copy shares the bytes: same ETag, no second upload
    assert pool.stat("moved/big.bin", "main").etag == pool.stat("blobs/big.bin", "main").etag
    fs.delete_file(f"{bucket}/main/moved/big.bin")
    fs.create_dir(f"{bucket}/main/empty/dir")
    assert fs.get_file_info(f"{bucket}/main/empty/dir").type == pafs.FileType.Directory
    fs.delete_dir_contents(f"{bucket}/main/blobs")
    left = fs.get_file_info(pafs.FileSelector(f"{bucket}/main", recursive=True))
    assert [f.path for f in left if f.type == pafs.FileType.File] == []
