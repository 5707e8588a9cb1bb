"""Buckets: ListBuckets, HeadBucket, GetBucketLocation, CreateBucket, DeleteBucket.

A bucket is a file pool (record pools are not buckets: they are neither listed nor
reachable). CreateBucket needs what creating a pool needs (``write`` on the lake),
DeleteBucket what dropping one needs (``write`` on the pool), and only drops a pool
whose every branch is empty, staged changes included: S3's BucketNotEmpty, and no
branch's files are lost by a client that believes it deletes an empty bucket. The
pool's history goes with it, as dropping a pool always does.
"""

from __future__ import annotations

import re

from limno.errors import NotFoundError
from limno.gateway.handlers_common import Call, Reply, parse_mtime, xml_reply
from limno.gateway.operations import Op
from limno.gateway.s3errors import S3Error
from limno.gateway.s3xml import BucketEntry, list_buckets, location_constraint, parse_create_bucket

__all__ = ["HANDLERS"]


def _list_buckets(call: Call) -> Reply:
    call.check("read", None, "the lake")
    buckets = [
        BucketEntry(config.name, parse_mtime(config.created))
        for config in call.lake.list_pools()
        if config.kind == "files" and call.may("read", config.id)
    ]
    return xml_reply(list_buckets(sorted(buckets, key=lambda b: b.name)))


def _region_header(call: Call) -> list[tuple[str, str]]:
    return [("x-amz-bucket-region", call.options.region)]


def _head_bucket(call: Call) -> Reply:
    call.file_pool()
    return Reply(200, _region_header(call))


def _bucket_location(call: Call) -> Reply:
    call.file_pool()
    return xml_reply(location_constraint(call.options.region))


#: S3's rules for a new bucket's name (general purpose buckets): 3 to 63 lower-case
#: letters, digits, '.' and '-', starting and ending with a letter or digit, no '..',
#: not an IPv4 address; a pool name must start with a letter besides
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IPV4 = re.compile(r"\d+\.\d+\.\d+\.\d+")


def _check_bucket_name(name: str) -> None:
    if not _BUCKET_NAME.fullmatch(name) or ".." in name or _IPV4.fullmatch(name):
        raise S3Error(
            "InvalidBucketName",
            f"{name!r}: bucket names are 3 to 63 lower-case letters, digits, '.' and '-',"
            " starting and ending with a letter or digit",
            resource=f"/{name}",
            BucketName=name,
        )


def _create_bucket(call: Call) -> Reply:
    name = call.bucket
    call.check("write", None, "the lake")
    _check_bucket_name(name)
    parse_create_bucket(call.read_body())  # a region, if any, is the one region there is
    try:
        config = call.lake.registry.find(name)
    except NotFoundError:
        config = None
    if config is not None:
        if config.kind == "files" and config.name == name and call.may("read", config.id):
            raise S3Error("BucketAlreadyOwnedByYou", resource=f"/{name}", BucketName=name)
        raise S3Error("BucketAlreadyExists", resource=f"/{name}", BucketName=name)
    pool = call.lake.create_pool(name, kind="files", author=call.author)
    root = call.root_branch
    if root is not None and root not in pool.branches():
        pool.branch(root)
    return Reply(200, [("location", f"/{name}")])


def _delete_bucket(call: Call) -> Reply:
    name = call.bucket
    pool = call.file_pool(action="write")
    for branch in sorted(pool.branches()):
        page = pool.list(branch, limit=1)
        if page.entries or page.prefixes:
            raise S3Error(
                "BucketNotEmpty",
                f"branch {branch!r} of pool {name!r} has files (staged ones count)",
                resource=f"/{name}",
                BucketName=name,
            )
    call.lake.drop_pool(name)
    return Reply(204)


HANDLERS = {
    Op.ListBuckets: _list_buckets,
    Op.HeadBucket: _head_bucket,
    Op.GetBucketLocation: _bucket_location,
    Op.CreateBucket: _create_bucket,
    Op.DeleteBucket: _delete_bucket,
}
