"""Listings: ListObjects (v1), ListObjectsV2 and ListObjectVersions.

A bucket's keys are ``<ref>/<path>``, so one listing may span refs. A prefix that
names a ref (``main/``, ``v1/data/``) lists that ref, any ref (a tag, a commit id);
a shorter prefix lists the branches whose keys it can reach, one after another in
key order (branches sorted by ``name + "/"``, so that their keys concatenate in
order). With the ``/`` delimiter a branch then rolls up into one common prefix,
``main/``: ``aws s3 ls s3://pool/`` shows the branches as folders, empty ones too.
With ``--s3-root-branch`` a listing is that one branch's.

Pages: each page asks the lake for one item more than it answers, to know whether
it is the last. The markers (v1's marker, v2's start-after and continuation token,
the versions' key-marker) are all "the last key or prefix answered"; v2's token is
that key, base64url-encoded (opaque, as S3 says it is).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import TYPE_CHECKING

from limno.errors import NotFoundError
from limno.gateway.handlers_common import Call, Reply, parse_mtime, xml_reply
from limno.gateway.operations import Op
from limno.gateway.s3errors import S3Error
from limno.gateway.s3xml import (
    ObjectEntry,
    Owner,
    check_encoding_type,
    list_object_versions,
    list_objects_v1,
    list_objects_v2,
)

if TYPE_CHECKING:
    from limno.api.local_files import LocalFilePool
    from limno.pools.files.entries import FileEntry

__all__ = ["HANDLERS", "Page", "list_page", "max_keys"]

MAX_KEYS = 1000


@dataclass(frozen=True)
class Page:
    """Keys (with their entries) and common prefixes (entry None), in key order."""

    items: list[tuple[str, FileEntry | None]]
    truncated: bool

    @property
    def entries(self) -> list[tuple[str, FileEntry]]:
        return [(key, entry) for key, entry in self.items if entry is not None]

    @property
    def prefixes(self) -> list[str]:
        return [key for key, entry in self.items if entry is None]

    @property
    def last(self) -> str | None:
        return self.items[-1][0] if self.items else None


def _sources(call: Call, pool: LocalFilePool, prefix: str) -> list[tuple[str, str]]:
    """The refs a listing of ``prefix`` reads, with the key prefix of each, in key order."""
    if call.root_branch is not None:
        return [(call.root_branch, "")]
    if "/" in prefix:
        ref = prefix.split("/", 1)[0]
        return [(ref, ref + "/")]
    bases = sorted(f"{branch}/" for branch in pool.branches())
    return [(base[:-1], base) for base in bases if base.startswith(prefix)]


def list_page(
    call: Call, pool: LocalFilePool, prefix: str, delimiter: str | None, after: str, limit: int
) -> Page:
    """Up to ``limit`` keys and common prefixes under ``prefix``, after ``after``."""
    if limit <= 0:
        return Page([], False)
    want = limit + 1
    items: list[tuple[str, FileEntry | None]] = []
    for ref, base in _sources(call, pool, prefix):
        if len(items) >= want:
            break
        path_prefix = prefix[len(base) :] if prefix.startswith(base) else ""
        if delimiter and len(base) > len(prefix):
            cut = base.find(delimiter, len(prefix))
            if cut >= 0:  # the whole ref rolls up into one common prefix
                rolled = base[: cut + len(delimiter)]
                if rolled > after and (not items or items[-1][0] != rolled):
                    items.append((rolled, None))
                continue
        if after.startswith(base):
            path_after = after[len(base) :]
        elif after < base:
            path_after = ""
        else:
            continue  # every key of this ref is before the marker
        while len(items) < want:
            try:
                listing = pool.list(ref, path_prefix, delimiter, path_after, want - len(items))
            except NotFoundError:
                break  # no such ref: nothing under it
            found: list[tuple[str, FileEntry | None]] = [
                (base + e.path, e) for e in listing.entries
            ]
            found += [(base + p, None) for p in listing.prefixes]
            items += sorted(found, key=lambda item: item[0])
            if not listing.truncated or not listing.next_after:
                break
            path_after = listing.next_after
    return Page(items[:limit], len(items) > limit)


def max_keys(call: Call, name: str = "max-keys") -> int:
    """The page size asked for (at most 1,000, S3's cap)."""
    text = call.query.get(name)
    if text is None or text == "":
        return MAX_KEYS
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise S3Error(
            "InvalidArgument",
            f"Provided {name} not an integer or within integer range",
            ArgumentName=name,
            ArgumentValue=text,
        )
    return min(value, MAX_KEYS)


def _objects(page: Page, owner: bool = False) -> list[ObjectEntry]:
    return [
        ObjectEntry(
            key,
            parse_mtime(entry.mtime),
            entry.etag,
            entry.size,
            owner=Owner() if owner else None,
        )
        for key, entry in page.entries
    ]


def _listing_args(call: Call) -> tuple[LocalFilePool, str, str | None, str | None]:
    pool = call.file_pool()
    encoding = call.query.get("encoding-type")
    check_encoding_type(encoding)
    return pool, call.query.get("prefix", ""), call.query.get("delimiter") or None, encoding


def _list_v1(call: Call) -> Reply:
    pool, prefix, delimiter, encoding = _listing_args(call)
    marker = call.query.get("marker", "")
    limit = max_keys(call)
    page = list_page(call, pool, prefix, delimiter, marker, limit)
    body = list_objects_v1(
        bucket=call.bucket,
        prefix=prefix,
        marker=marker,
        delimiter=delimiter,
        max_keys=limit,
        is_truncated=page.truncated,
        contents=_objects(page, owner=True),
        common_prefixes=page.prefixes,
        # S3 names the next marker only with a delimiter (else: the last key)
        next_marker=page.last if page.truncated and delimiter else None,
        encoding_type=encoding,
    )
    return xml_reply(body)


def _token(key: str) -> str:
    return base64.urlsafe_b64encode(b"1:" + key.encode("utf-8")).decode()


def _untoken(token: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(token.encode())
        if not raw.startswith(b"1:"):
            raise ValueError("unknown form")
        return raw[2:].decode("utf-8")
    except (ValueError, binascii.Error):
        raise S3Error(
            "InvalidArgument",
            "The continuation token provided is incorrect",
            ArgumentName="continuation-token",
        ) from None


def _list_v2(call: Call) -> Reply:
    pool, prefix, delimiter, encoding = _listing_args(call)
    token = call.query.get("continuation-token")
    start_after = call.query.get("start-after")
    after = _untoken(token) if token else (start_after or "")  # empty: none, as S3
    limit = max_keys(call)
    page = list_page(call, pool, prefix, delimiter, after, limit)
    last = page.last
    body = list_objects_v2(
        bucket=call.bucket,
        prefix=prefix,
        delimiter=delimiter,
        max_keys=limit,
        is_truncated=page.truncated,
        contents=_objects(page, owner=call.query.get("fetch-owner", "").lower() == "true"),
        common_prefixes=page.prefixes,
        continuation_token=token,
        next_continuation_token=_token(last) if page.truncated and last is not None else None,
        start_after=start_after,
        fetch_owner=call.query.get("fetch-owner", "").lower() == "true",
        encoding_type=encoding,
    )
    return xml_reply(body)


def _list_versions(call: Call) -> Reply:
    pool, prefix, delimiter, encoding = _listing_args(call)
    key_marker = call.query.get("key-marker", "")
    version_marker = call.query.get("version-id-marker", "")
    limit = max_keys(call)
    page = list_page(call, pool, prefix, delimiter, key_marker, limit)
    body = list_object_versions(
        bucket=call.bucket,
        prefix=prefix,
        key_marker=key_marker,
        version_id_marker=version_marker,
        delimiter=delimiter,
        max_keys=limit,
        is_truncated=page.truncated,
        contents=_objects(page, owner=True),
        common_prefixes=page.prefixes,
        next_key_marker=page.last if page.truncated else None,
        encoding_type=encoding,
    )
    return xml_reply(body)


HANDLERS = {
    Op.ListObjects: _list_v1,
    Op.ListObjectsV2: _list_v2,
    Op.ListObjectVersions: _list_versions,
}
