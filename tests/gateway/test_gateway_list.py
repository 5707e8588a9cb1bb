"""The S3 gateway's listings through boto3: ListObjects v1 and v2 (prefix, ``/``
delimiter, marker, start-after, continuation tokens, max-keys, encoding-type=url,
fetch-owner), ListObjectVersions, branches as the bucket's top-level prefixes, and a
paginator over 2,500 keys."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import pytest
from botocore.exceptions import ClientError

from gateway.gateway_app_support import Gateway, gateway, s3

__all__ = ["gateway", "s3"]  # fixtures

KEYS = ["a.txt", "dir/b.txt", "dir/c.txt", "dir/sub/d.txt", "e&f.txt", "z/zz.txt"]


@pytest.fixture(scope="module")
def tree(gateway: Gateway, s3: Any) -> str:
    """A pool with KEYS on main (staged) and branch dev (from main, before they were written)
    holding one file of its own."""
    bucket = gateway.pool("tree")
    gateway.lake().file_pool(bucket).branch("dev")
    for key in KEYS:
        s3.put_object(Bucket=bucket, Key=f"main/{key}", Body=key.encode())
    s3.put_object(Bucket=bucket, Key="dev/only-dev", Body=b"d")
    return bucket


def keys(answer: dict[str, Any]) -> list[str]:
    return [o["Key"] for o in answer.get("Contents", [])]


def prefixes(answer: dict[str, Any]) -> list[str]:
    return [p["Prefix"] for p in answer.get("CommonPrefixes", [])]


def test_v2_prefix_and_delimiter(s3: Any, tree: str) -> None:
    whole = s3.list_objects_v2(Bucket=tree, Prefix="main/")
    assert keys(whole) == [f"main/{k}" for k in KEYS]
    assert whole["KeyCount"] == len(KEYS) and not whole["IsTruncated"]
    top = s3.list_objects_v2(Bucket=tree, Prefix="main/", Delimiter="/")
    assert keys(top) == ["main/a.txt", "main/e&f.txt"]
    assert prefixes(top) == ["main/dir/", "main/z/"]
    assert top["KeyCount"] == 4
    sub = s3.list_objects_v2(Bucket=tree, Prefix="main/dir/", Delimiter="/")
    assert keys(sub) == ["main/dir/b.txt", "main/dir/c.txt"]
    assert prefixes(sub) == ["main/dir/sub/"]
    assert keys(s3.list_objects_v2(Bucket=tree, Prefix="main/dir/c")) == ["main/dir/c.txt"]
    assert "Contents" not in s3.list_objects_v2(Bucket=tree, Prefix="main/nothing")


def test_branches_are_the_top_level(s3: Any, tree: str) -> None:
    top = s3.list_objects_v2(Bucket=tree, Delimiter="/")
    assert prefixes(top) == ["dev/", "main/"] and "Contents" not in top
    everything = s3.list_objects_v2(Bucket=tree)
    assert keys(everything) == ["dev/only-dev"] + [f"main/{k}" for k in KEYS]
    assert prefixes(s3.list_objects_v2(Bucket=tree, Prefix="ma", Delimiter="/")) == ["main/"]
    assert keys(s3.list_objects_v2(Bucket=tree, Prefix="d")) == ["dev/only-dev"]


def test_v2_pages_max_keys_start_after(s3: Any, tree: str) -> None:
    first = s3.list_objects_v2(Bucket=tree, Prefix="main/", MaxKeys=2)
    assert keys(first) == ["main/a.txt", "main/dir/b.txt"] and first["IsTruncated"]
    second = s3.list_objects_v2(
        Bucket=tree, Prefix="main/", MaxKeys=2, ContinuationToken=first["NextContinuationToken"]
    )
    assert keys(second) == ["main/dir/c.txt", "main/dir/sub/d.txt"]
    assert second["ContinuationToken"] == first["NextContinuationToken"]
    after = s3.list_objects_v2(Bucket=tree, Prefix="main/", StartAfter="main/dir/sub/d.txt")
    assert keys(after) == ["main/e&f.txt", "main/z/zz.txt"]
    assert after["StartAfter"] == "main/dir/sub/d.txt"
    # a page that ends on a common prefix resumes after everything under it
    page = s3.list_objects_v2(Bucket=tree, Prefix="main/", Delimiter="/", MaxKeys=2)
    assert keys(page) == ["main/a.txt"] and prefixes(page) == ["main/dir/"]
    rest = s3.list_objects_v2(
        Bucket=tree,
        Prefix="main/",
        Delimiter="/",
        ContinuationToken=page["NextContinuationToken"],
    )
    assert keys(rest) == ["main/e&f.txt"] and prefixes(rest) == ["main/z/"]
    empty = s3.list_objects_v2(Bucket=tree, Prefix="main/", MaxKeys=0)
    assert "Contents" not in empty and empty["KeyCount"] == 0
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket=tree, ContinuationToken="not a token")
    assert e.value.response["Error"]["Code"] == "InvalidArgument"


def test_v2_fetch_owner_and_url_encoding(s3: Any, tree: str) -> None:
    plain = s3.list_objects_v2(Bucket=tree, Prefix="main/a")
    assert "Owner" not in plain["Contents"][0]
    owned = s3.list_objects_v2(Bucket=tree, Prefix="main/a", FetchOwner=True)
    assert owned["Contents"][0]["Owner"]["ID"]
    # boto3 asks for encoding-type=url itself and decodes the answer
    listed = s3.list_objects_v2(Bucket=tree, Prefix="main/e&", EncodingType="url")
    assert [unquote(k) for k in keys(listed)] == ["main/e&f.txt"]


def test_v1_marker_and_next_marker(s3: Any, tree: str) -> None:
    first = s3.list_objects(Bucket=tree, Prefix="main/", MaxKeys=3)
    assert keys(first) == ["main/a.txt", "main/dir/b.txt", "main/dir/c.txt"]
    assert first["IsTruncated"] and "NextMarker" not in first  # only with a delimiter
    assert first["Contents"][0]["Owner"]["ID"]
    second = s3.list_objects(Bucket=tree, Prefix="main/", Marker="main/dir/c.txt")
    assert keys(second) == ["main/dir/sub/d.txt", "main/e&f.txt", "main/z/zz.txt"]
    assert not second["IsTruncated"]
    delimited = s3.list_objects(Bucket=tree, Prefix="main/", Delimiter="/", MaxKeys=2)
    assert delimited["NextMarker"] == "main/dir/"
    rest = s3.list_objects(Bucket=tree, Prefix="main/", Delimiter="/", Marker="main/dir/")
    assert keys(rest) == ["main/e&f.txt"] and prefixes(rest) == ["main/z/"]


def test_list_object_versions(s3: Any, tree: str) -> None:
    answer = s3.list_object_versions(Bucket=tree, Prefix="main/dir/")
    versions = answer["Versions"]
    assert [v["Key"] for v in versions] == [
        "main/dir/b.txt",
        "main/dir/c.txt",
        "main/dir/sub/d.txt",
    ]
    assert all(v["VersionId"] == "null" and v["IsLatest"] for v in versions)
    page = s3.list_object_versions(Bucket=tree, Prefix="main/", MaxKeys=2)
    assert page["IsTruncated"] and page["NextKeyMarker"] == "main/dir/b.txt"
    rest = s3.list_object_versions(Bucket=tree, Prefix="main/", KeyMarker=page["NextKeyMarker"])
    assert [v["Key"] for v in rest["Versions"]][0] == "main/dir/c.txt"


def test_paginator_over_2500_keys(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool("many")
    pool = gateway.lake().file_pool(bucket)
    names = [f"k/{i:05d}" for i in range(2500)]
    for name in names:  # staged through the lake: the listing is what is tested here
        pool.put("main", name, b"")
    paginator = s3.get_paginator("list_objects_v2")
    pages = list(paginator.paginate(Bucket=bucket, Prefix="main/"))
    assert [len(p["Contents"]) for p in pages] == [1000, 1000, 500]
    assert [o["Key"] for p in pages for o in p["Contents"]] == [f"main/{n}" for n in names]
    v1 = list(s3.get_paginator("list_objects").paginate(Bucket=bucket, Prefix="main/k/00"))
    assert sum(len(p["Contents"]) for p in v1) == 1000
