"""Table formats written by their own libraries through the S3 gateway onto a branch,
merged with ``limno merge``, and read back at main.

- Delta Lake (delta-rs, ``deltalake``): its log names data files relative to the
  table's root, so a table written at ``s3://POOL/dev/t`` is the same table at
  ``s3://POOL/main/t`` once merged. delta-rs commits a version with a conditional
  put (If-None-Match: ``*``) by default: no unsafe-rename flag, no lock; a writer
  holding a stale version loses the race for that version's log file (412) and
  commits the next one.
- Iceberg (pyiceberg, SQL catalog on SQLite): its metadata names every file by its
  absolute URI, the ref included if keys were ``REF/PATH``. So the table is written
  through a gateway that serves the branch as every bucket's root
  (``--s3-root-branch dev``: ``s3://POOL/wh/...``), and read through one serving
  main at the root, on the same lake: the same URIs, another branch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.sql import SqlCatalog

from gateway.clients_support import REGION, Gateway, limno, plain
from gateway.gateway_app_support import new_gateway
from server_support import start_server

__all__ = ["plain"]  # fixtures


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "city": pa.array([("Oslo", "Lima", "Pune")[i % 3] for i in range(start, start + n)]),
            "amount": pa.array([i * 1.25 for i in range(start, start + n)], pa.float64()),
        }
    )


def by_id(t: pa.Table) -> list[dict[str, Any]]:
    return t.select(["id", "city", "amount"]).sort_by("id").to_pylist()


# -- Delta Lake -----------------------------------------------------------------------------


def delta_options(gateway: Gateway) -> dict[str, str]:
    key_id, secret = gateway.key
    return {
        "AWS_ENDPOINT_URL": gateway.url,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": key_id,
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_REGION": REGION,
    }


def test_delta_on_a_branch_merged_into_main(
    plain: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = plain.pool("delta")
    pool = plain.lake().file_pool(bucket)
    pool.branch("dev")
    options = delta_options(plain)
    uri = f"s3://{bucket}/dev/tables/sales"
    first, second, third = rows(100), rows(50, 100), rows(25, 150)

    write_deltalake(uri, first, storage_options=options, partition_by=["city"])
    stale = DeltaTable(uri, storage_options=options)  # at version 0
    write_deltalake(uri, second, mode="append", storage_options=options)
    # version 1 is taken: the conditional put of its log file fails, delta-rs checks
    # for conflicts (appends have none) and commits version 2
    write_deltalake(stale, third, mode="append")
    on_dev = DeltaTable(uri, storage_options=options)
    assert on_dev.version() == 2
    everything = pa.concat_tables([first, second, third])
    assert by_id(on_dev.to_pyarrow_table()) == by_id(everything)
    log = sorted(c.path for c in pool.uncommitted("dev") if "_delta_log/" in c.path)
    assert log == [f"tables/sales/_delta_log/{v:020}.json" for v in range(3)]

    limno(plain, monkeypatch, "commit", "-p", f"{bucket}@dev", "-m", "sales, by delta-rs")
    # main moved meanwhile: the merge is a three-way one
    pool.put("main", "README.md", b"sales data\n")
    pool.commit("main", "a readme")
    limno(plain, monkeypatch, "merge", "-p", bucket, "dev", "-m", "merge dev")
    assert pool.log("main")[0].message == "merge dev"
    limno(plain, monkeypatch, "branch", "-p", bucket, "-d", "dev")

    at_main = DeltaTable(f"s3://{bucket}/main/tables/sales", storage_options=options)
    assert at_main.version() == 2
    assert by_id(at_main.to_pyarrow_table()) == by_id(everything)
    history = at_main.history()
    assert sorted(h["version"] for h in history) == [0, 1, 2]
    assert [h["operation"] for h in history] == ["WRITE", "WRITE", "WRITE"]
    first_version = DeltaTable(
        f"s3://{bucket}/main/tables/sales", version=0, storage_options=options
    )
    assert by_id(first_version.to_pyarrow_table()) == by_id(first)
    assert by_id(at_main.to_pyarrow_table(filters=[("city", "=", "Lima")])) == [
        r for r in by_id(everything) if r["city"] == "Lima"
    ]
    # main's table goes on: an append there is version 3
    write_deltalake(
        f"s3://{bucket}/main/tables/sales", rows(5, 175), mode="append", storage_options=options
    )
    assert DeltaTable(f"s3://{bucket}/main/tables/sales", storage_options=options).version() == 3


# -- Iceberg -------------------------------------------------------------------------------


def catalog(gateway: Gateway, database: Path, bucket: str) -> SqlCatalog:
    key_id, secret = gateway.key
    return SqlCatalog(
        "lake",
        uri=f"sqlite:///{database}",
        warehouse=f"s3://{bucket}/wh",
        **{
            "s3.endpoint": gateway.url,
            "s3.access-key-id": key_id,
            "s3.secret-access-key": secret,
            "s3.region": REGION,
        },
    )


@pytest.fixture(scope="module")
def rooted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, Gateway]]:
    """Two gateways on one lake: ``dev`` at every bucket's root, and ``main``."""
    root = tmp_path_factory.mktemp("iceberg")
    writer = new_gateway(root, "--s3-root-branch", "dev")
    try:
        served = start_server(writer.served.lake, "--s3-port", "0", "--s3-root-branch", "main")
        reader = Gateway(served)
        try:
            yield writer, reader
        finally:
            reader.close()
            assert served.stop() == 0, served.lines
    finally:
        writer.close()
        assert writer.served.stop() == 0, writer.served.lines


def test_iceberg_on_a_branch_merged_into_main(
    rooted: tuple[Gateway, Gateway], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, reader = rooted
    bucket = writer.pool("ice")
    pool = writer.lake().file_pool(bucket)
    pool.branch("dev")
    database = tmp_path / "catalog.db"
    first, second = rows(200), rows(80, 200)

    on_dev = catalog(writer, database, bucket)
    try:
        on_dev.create_namespace("shop")
        table = on_dev.create_table("shop.sales", schema=first.schema)
        table.append(first)
        table.append(second)
        assert by_id(table.scan().to_arrow()) == by_id(pa.concat_tables([first, second]))
        assert len(table.snapshots()) == 2
        location = table.metadata_location
        assert location.startswith(f"s3://{bucket}/wh/shop/sales/metadata/")
    finally:
        on_dev.engine.dispose()
    staged = [c.path for c in pool.uncommitted("dev")]
    assert f"wh/shop/sales/metadata/{location.rsplit('/', 1)[1]}" in staged

    at_main = catalog(reader, database, bucket)
    try:
        # the catalog points at metadata main does not have yet
        with pytest.raises(FileNotFoundError, match="metadata.json"):
            at_main.load_table("shop.sales").scan().to_arrow()
        limno(writer, monkeypatch, "commit", "-p", f"{bucket}@dev", "-m", "sales, by pyiceberg")
        limno(writer, monkeypatch, "merge", "-p", bucket, "dev")
        limno(writer, monkeypatch, "branch", "-p", bucket, "-d", "dev")
        merged = at_main.load_table("shop.sales")
        assert merged.metadata_location == location
        assert by_id(merged.scan().to_arrow()) == by_id(pa.concat_tables([first, second]))
        snapshots = merged.snapshots()
        assert len(snapshots) == 2
        assert by_id(merged.scan(snapshot_id=snapshots[0].snapshot_id).to_arrow()) == by_id(first)
    finally:
        at_main.engine.dispose()
