"""What the gateway keeps with an object beyond the lake's entry fields.

Two things S3 answers about an object that a file entry has no field for, kept in
the entry's metadata under reserved names (they start with ``:``, which no
``x-amz-meta-`` header name can produce, so they never clash with user metadata and
are never sent back as ``x-amz-meta-*``):

- ``:x-amz-checksum-<algorithm>``: the checksum a PutObject sent (header or
  aws-chunked trailer) and the gateway verified; GetObject / HeadObject return it when
  the client asks (``x-amz-checksum-mode: ENABLED``), as S3 does, with
  ``x-amz-checksum-type: FULL_OBJECT``. A multipart object keeps none (S3's composite
  checksums of parts are not computed).
- ``:parts``: the sizes of a multipart object's parts, in order, so that
  ``GET ?partNumber=N`` serves part N's bytes. Runs of equal sizes are written
  ``size*count`` (``8388608*12,1234``): parts but the last are usually one size.

A value known only after the body (a trailer checksum) or at completion (the part
sizes) is handed to the pool's one stage of the entry (``put(late_metadata=)``,
``complete(metadata=)``), never staged again afterwards: a second stage could undo a
newer write of the same path (a staging entry has no compare-and-swap).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from limno.gateway.checksums import algorithm_of_header
from limno.gateway.handlers_common import RESERVED
from limno.gateway.headers import HeaderMap
from limno.gateway.s3errors import S3Error

if TYPE_CHECKING:
    from limno.pools.files.entries import FileEntry

__all__ = [
    "PARTS",
    "checksum_headers",
    "checksum_metadata",
    "encode_parts",
    "kept",
    "part_range",
    "parts_of",
    "sent_checksums",
]

CHECKSUM = RESERVED + "x-amz-checksum-"
PARTS = RESERVED + "parts"


def checksum_metadata(checksums: Mapping[str, str]) -> dict[str, str]:
    """The reserved metadata of verified checksums (``x-amz-checksum-*`` header -> value)."""
    out = {}
    for name, value in checksums.items():
        algorithm = algorithm_of_header(name)
        if algorithm is not None:
            out[CHECKSUM + algorithm] = value
    return out


def sent_checksums(headers: HeaderMap) -> dict[str, str]:
    """The reserved metadata of the checksum headers a request carries (the body is
    checked against them before the write is staged, so they are the object's)."""
    return checksum_metadata({name: value for name, value in headers.items()})


def checksum_headers(entry: FileEntry) -> list[tuple[str, str]]:
    """The ``x-amz-checksum-*`` headers of an object that has a stored checksum."""
    out = [(name[1:], value) for name, value in entry.metadata.items() if name.startswith(CHECKSUM)]
    if out:
        out.append(("x-amz-checksum-type", "FULL_OBJECT"))
    return sorted(out)


def kept(entry: FileEntry) -> dict[str, str]:
    """The reserved metadata of ``entry`` that stays with its bytes (checksums, part
    sizes): a copy that replaces the metadata keeps these."""
    return {k: v for k, v in entry.metadata.items() if k.startswith(CHECKSUM) or k == PARTS}


def encode_parts(sizes: Iterable[int]) -> str:
    """``:parts`` of part sizes in order (runs of one size as ``size*count``)."""
    runs = []
    for size, group in itertools.groupby(sizes):
        count = sum(1 for _ in group)
        runs.append(f"{size}*{count}" if count > 1 else str(size))
    return ",".join(runs)


def parts_of(entry: FileEntry) -> list[int] | None:
    """The part sizes of a multipart object (None: written in one piece, or unknown)."""
    text = entry.metadata.get(PARTS)
    if not text:
        return None
    sizes: list[int] = []
    try:
        for run in text.split(","):
            size, _, count = run.partition("*")
            sizes += [int(size)] * (int(count) if count else 1)
    except ValueError:
        return None
    return sizes if sum(sizes) == entry.size else None


def part_range(entry: FileEntry, number: int) -> tuple[int, int, int]:
    """``(start, end, count)`` of part ``number`` (end exclusive; count: how many parts
    the object has). An object written in one piece is its own part 1. InvalidPartNumber
    (416) past the last part; NotImplemented for a multipart object completed before
    part sizes were kept."""
    sizes = parts_of(entry)
    if sizes is None:
        if "-" in entry.etag and entry.etag.rsplit("-", 1)[1] != "1":
            raise S3Error(
                "NotImplemented",
                "the part sizes of this multipart object were not kept: use a Range",
            )
        sizes = [entry.size]
    if number > len(sizes):
        raise S3Error(
            "InvalidPartNumber", "The requested partnumber is not satisfiable", status=416
        )
    start = sum(sizes[: number - 1])
    return start, start + sizes[number - 1], len(sizes)
