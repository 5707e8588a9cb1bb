"""Multipart uploads of a file pool, with S3's rules: parts uploaded in any order, by
any number of processes at once, then completed into one blob staged on a branch.

Layout, under ``<pool-id>/multipart/<upload-id>/`` (the upload id is a KSUID)::

    upload.json          branch, path, content type, metadata, initiated (the upload exists
                         while this does; it is written first and removed first)
    part-00042.json      part 42: its ETag, size, mtime and the id of its bytes
    blobs/<id>           the bytes of one part upload

A part upload writes its bytes under a fresh id, then replaces the part's record with
one atomic put, so concurrent uploads of the same part number (from threads or
processes) leave one winner whose record and bytes agree: the last record written.
Bytes that lost (or were replaced) stay until the upload is completed, aborted or
expired, which remove the whole directory.

Completing reads the records of the listed parts, checks S3's rules, concatenates the
parts' bytes into one new blob under ``data/`` (on a local store the kernel copies
them), stages the entry on the upload's branch with the gc ticket read before the
blob was written, and only then removes the upload: a completion cut short leaves the
upload as it was (and at most an unreferenced blob, which vacuum frees), never a
partial object. A second completion of the same upload finds no upload.

Abandoned uploads (idle: no file of theirs written for a while) are freed by
:func:`expired_uploads`, which the file pool's vacuum calls with its grace period. A
part upload or a completion holds a lease naming its upload while it writes, so an
upload is never expired under a live writer, however slowly its bytes arrive.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime as dt
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, TypeVar

from limno.errors import (
    AlreadyExistsError,
    InvalidInputError,
    LimnoError,
    MultipartError,
    NotFoundError,
    StorageError,
)
from limno.ksuid import is_ksuid, ksuid
from limno.pools.files.blobs import CHUNK, Blob, BlobWriter, read_blob
from limno.pools.files.entries import DEFAULT_CONTENT_TYPE, FileEntry, now_mtime
from limno.pools.files.paths import validate_path, validate_prefix

if TYPE_CHECKING:
    from limno.core.versioning import Versioned
    from limno.storage import ObjectInfo, Storage

__all__ = [
    "DEFAULT_EXPIRY",
    "MAX_PARTS",
    "MAX_PART_SIZE",
    "MIN_PART_SIZE",
    "UPLOAD_DIR",
    "ExpiredUpload",
    "Multipart",
    "Part",
    "Upload",
    "expire_uploads",
    "expired_uploads",
    "multipart_etag",
]

UPLOAD_DIR = "multipart"
#: S3's bounds: part numbers 1..10000, parts of at most 5 GiB, all but the last >= 5 MiB
MAX_PARTS = 10_000
MIN_PART_SIZE = 5 << 20
MAX_PART_SIZE = 5 << 30
#: :func:`expire_uploads`' default idle time (a file pool's vacuum uses its grace period)
DEFAULT_EXPIRY = dt.timedelta(days=7)

#: the op of the lease a part upload or a completion holds: ``multipart <upload-id>``
_LEASE_OP = "multipart "
_PART = re.compile(r"part-(\d{5})\.json")
_T = TypeVar("_T")
_R = TypeVar("_R")


class _Pool(Protocol):
    """What this module needs of a :class:`~limno.pools.files.pool.FilePool`."""

    storage: Storage
    versioned: Versioned

    @property
    def id(self) -> str: ...

    def stat(self, path: str, ref: str | None = None) -> FileEntry: ...

    def stage_entry(
        self,
        branch: str,
        entry: FileEntry,
        since: int | None = None,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
    ) -> FileEntry: ...


@dataclass(frozen=True)
class Part:
    """An uploaded part: its number, the md5 hex of its bytes (no quotes), size, mtime."""

    number: int
    etag: str
    size: int
    mtime: str


@dataclass(frozen=True)
class Upload:
    """An upload in progress: where its object goes, and what it will carry."""

    id: str
    branch: str
    path: str
    initiated: str
    content_type: str = DEFAULT_CONTENT_TYPE
    metadata: Mapping[str, str] = field(default_factory=dict)


def multipart_etag(part_md5s: Sequence[str]) -> str:
    """S3's ETag of a completed upload: the md5 of the parts' binary md5s, ``-N``."""
    digest = hashlib.md5(b"".join(bytes.fromhex(m) for m in part_md5s), usedforsecurity=False)
    return f"{digest.hexdigest()}-{len(part_md5s)}"


def _no_upload(upload_id: str) -> MultipartError:
    return MultipartError(
        f"no multipart upload {upload_id!r} (it may have been completed or aborted)",
        reason="no-upload",
    )


def _check_number(number: int) -> int:
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_PARTS:
        raise InvalidInputError(
            f"part number must be an integer between 1 and {MAX_PARTS}, not {number!r}"
        )
    return number


def _bare(etag: str) -> str:
    """An ETag as clients send it back (quoted or not) compared as stored."""
    return etag.strip().strip('"').lower()


class Multipart:
    """The multipart uploads of one file pool (see the module docstring)."""

    def __init__(self, pool: _Pool) -> None:
        self.pool = pool
        self.storage = pool.storage

    # -- places ------------------------------------------------------------------------
    def _dir(self, upload_id: str) -> str:
        if not isinstance(upload_id, str) or not is_ksuid(upload_id):
            raise _no_upload(upload_id)
        return f"{self.pool.id}/{UPLOAD_DIR}/{upload_id}"

    def _record_path(self, upload_id: str, number: int) -> str:
        return f"{self._dir(upload_id)}/part-{number:05d}.json"

    def _bytes_dir(self, upload_id: str) -> str:
        return f"{self._dir(upload_id)}/blobs"

    # -- uploads -----------------------------------------------------------------------
    def create(
        self,
        branch: str,
        path: str,
        *,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> str:
        """Start an upload of ``path`` on ``branch``; its id. The branch must exist and
        take direct writes (ProtectedBranchError now, rather than at completion)."""
        validate_path(path)
        meta = {str(k).lower(): str(v) for k, v in (metadata or {}).items()}
        self.pool.versioned.writable_head(branch)
        upload_id = ksuid()
        doc = {
            "branch": branch,
            "path": path,
            "content_type": content_type or DEFAULT_CONTENT_TYPE,
            "metadata": meta,
            "initiated": now_mtime(),
        }
        self.storage.put_if_absent(f"{self._dir(upload_id)}/upload.json", _dumps(doc))
        return upload_id

    def upload(self, upload_id: str) -> Upload:
        """The upload ``upload_id``; MultipartError (reason ``no-upload``, 404) if none."""
        try:
            raw = self.storage.get(f"{self._dir(upload_id)}/upload.json")
        except NotFoundError:
            raise _no_upload(upload_id) from None
        doc = json.loads(raw)
        return Upload(
            id=upload_id,
            branch=doc["branch"],
            path=doc["path"],
            initiated=doc["initiated"],
            content_type=doc.get("content_type") or DEFAULT_CONTENT_TYPE,
            metadata=dict(doc.get("metadata") or {}),
        )

    def uploads(
        self,
        prefix: str = "",
        after_path: str = "",
        after_id: str = "",
        limit: int = 1000,
        *,
        branch: str | None = None,
    ) -> tuple[list[Upload], bool]:
        """Uploads in progress whose path starts with ``prefix`` (on ``branch`` if given),
        in (path, id) order: a page after ``after_path`` (with ``after_id``: after that
        upload of that path, as S3's key and upload-id markers), and whether more follow."""
        validate_prefix(prefix)
        if limit < 0:
            raise InvalidInputError(f"limit must not be negative, not {limit}")
        listed = self.storage.list(f"{self.pool.id}/{UPLOAD_DIR}", delimiter="/")
        ids = [p.rstrip("/").rsplit("/", 1)[-1] for p in listed.prefixes]
        found = [u for u in _parallel(self._maybe_upload, [i for i in ids if is_ksuid(i)]) if u]
        keep = [
            u
            for u in found
            if u.path.startswith(prefix)
            and (branch is None or u.branch == branch)
            and ((u.path, u.id) > (after_path, after_id) if after_id else u.path > after_path)
        ]
        keep.sort(key=lambda u: (u.path, u.id))
        return keep[:limit], len(keep) > limit

    def _maybe_upload(self, upload_id: str) -> Upload | None:
        try:
            return self.upload(upload_id)
        except MultipartError:
            return None  # completed or aborted meanwhile, or its leftovers

    def abort(self, upload_id: str) -> None:
        """Drop the upload and its parts; MultipartError (``no-upload``) if there is none."""
        self.upload(upload_id)
        self._remove(upload_id)

    def _remove(self, upload_id: str) -> None:
        """The upload's record first: the upload is gone from then on, so the rest is
        done on a best-effort basis (a failure there would make a retried completion
        find no upload; what is left, :func:`expire_uploads` frees)."""
        base = self._dir(upload_id)
        self.storage.delete(f"{base}/upload.json")
        with contextlib.suppress(LimnoError):
            _remove_tree(self.storage, base)

    # -- parts -------------------------------------------------------------------------
    def upload_part(
        self, upload_id: str, number: int, data: bytes | BinaryIO | Iterable[bytes]
    ) -> Part:
        """Store part ``number`` (replacing an earlier one of that number)."""
        _check_number(number)
        with self._busy(upload_id):
            self.upload(upload_id)
            with self._part_writer(upload_id) as writer:
                writer.write_from(data)
                blob = writer.publish()
            return self._record(upload_id, number, blob)

    @contextlib.contextmanager
    def _part_writer(self, upload_id: str) -> Iterator[BlobWriter]:
        """The writer of a part's bytes. Bytes that cannot be written because the upload
        completed or was aborted meanwhile (its folder, with the part's partial file,
        removed under the writer) fail as that upload's ``no-upload``, not as a storage
        error."""
        try:
            with BlobWriter(
                self.storage, self.pool.id, max_size=MAX_PART_SIZE, at=self._bytes_dir(upload_id)
            ) as writer:
                yield writer
        except StorageError:
            if not self.storage.exists(f"{self._dir(upload_id)}/upload.json"):
                raise _no_upload(upload_id) from None
            raise

    def _busy(self, upload_id: str) -> contextlib.AbstractContextManager[object]:
        """A lease saying "this upload is being written": expiry keeps it meanwhile,
        however long a part takes to arrive (see :func:`expired_uploads`)."""
        self._dir(upload_id)  # a well-formed id, or no-upload
        return self.pool.versioned.gc.leases.hold(_LEASE_OP + upload_id)

    def upload_part_copy(
        self,
        upload_id: str,
        number: int,
        src_ref: str,
        src_path: str,
        start: int | None = None,
        end: int | None = None,
    ) -> Part:
        """Store bytes ``[start, end)`` of ``src_path`` at ``src_ref`` (any ref; default:
        the whole file) as part ``number``. A range must lie within the file."""
        _check_number(number)
        with self._busy(upload_id):
            self.upload(upload_id)
            entry = self.pool.stat(src_path, src_ref)
            lo = 0 if start is None else start
            hi = entry.size if end is None else end
            if lo < 0 or hi > entry.size or (lo >= hi and (start is not None or end is not None)):
                raise InvalidInputError(
                    f"range [{lo}, {hi}) is not within {src_path!r} ({entry.size} bytes)"
                )
            with self._part_writer(upload_id) as writer:
                for piece in read_blob(self.storage, self.pool.id, entry, lo, hi, CHUNK * 8):
                    writer.write(piece)
                blob = writer.publish()
            return self._record(upload_id, number, blob)

    def _record(self, upload_id: str, number: int, blob: Blob) -> Part:
        part = Part(number, blob.md5, blob.size, now_mtime())
        doc = {"etag": part.etag, "size": part.size, "mtime": part.mtime, "blob": blob.id}
        self.storage.put(self._record_path(upload_id, number), _dumps(doc))
        if not self.storage.exists(f"{self._dir(upload_id)}/upload.json"):
            # completed or aborted while this part went up: its removal may have missed
            # what was just written, so take it back (what remains, expiry frees)
            with contextlib.suppress(NotFoundError):
                self.storage.delete(self._record_path(upload_id, number))
                self.storage.delete(f"{self._bytes_dir(upload_id)}/{blob.id}")
            raise _no_upload(upload_id)
        return part

    def _records(self, upload_id: str, numbers: Sequence[int]) -> list[dict[str, Any] | None]:
        """The records of parts ``numbers`` (None for a part never uploaded)."""

        def one(number: int) -> dict[str, Any] | None:
            try:
                doc: dict[str, Any] = json.loads(
                    self.storage.get(self._record_path(upload_id, number))
                )
            except NotFoundError:
                return None
            return doc

        return _parallel(one, numbers, self.storage.local_path("x") is None)

    def _numbers(self, upload_id: str) -> list[int]:
        listed = self.storage.list(self._dir(upload_id), delimiter="/")
        out = []
        for info in listed.objects:
            m = _PART.fullmatch(info.path.rsplit("/", 1)[-1])
            if m:
                out.append(int(m.group(1)))
        return sorted(out)

    def list_parts(
        self, upload_id: str, after: int = 0, limit: int = 1000
    ) -> tuple[list[Part], bool]:
        """The upload's parts numbered above ``after``, at most ``limit``, in number order,
        and whether more follow."""
        self.upload(upload_id)
        if limit < 0:
            raise InvalidInputError(f"limit must not be negative, not {limit}")
        numbers = [n for n in self._numbers(upload_id) if n > after]
        page = numbers[:limit]
        parts = [
            Part(n, doc["etag"], doc["size"], doc["mtime"])
            for n, doc in zip(page, self._records(upload_id, page), strict=True)
            if doc is not None
        ]
        return parts, len(numbers) > limit

    # -- completing --------------------------------------------------------------------
    def complete(
        self,
        upload_id: str,
        parts: Sequence[tuple[int, str]],
        metadata: Mapping[str, str] | None = None,
        if_none_match: bool = False,
        if_match: str | None = None,
    ) -> FileEntry:
        """Make the listed parts (number, ETag), in that order, one object staged on the
        upload's branch, and end the upload. MultipartError with S3's reason when a part
        is missing or has another ETag, the list is not ascending, or a part but the
        last is under 5 MiB. ``metadata`` is added to the upload's (the S3 gateway's
        part sizes), staged with the object in its one stage. ``if_none_match``: only if
        the path does not exist on the branch, ``if_match``: only if its ETag is this one
        (PreconditionFailedError, judged as the entry is staged, atomically among writers;
        the upload stays, as S3 keeps it, and the joined blob is left for vacuum)."""
        up = self.upload(upload_id)
        if not parts:
            raise InvalidInputError("a multipart upload completes with at least one part")
        previous = 0
        for number, _ in parts:
            if isinstance(number, bool) or not isinstance(number, int):
                raise MultipartError(f"part number {number!r} is not an integer")
            if not 1 <= number <= MAX_PARTS:
                raise MultipartError(f"no part {number}: part numbers are 1 to {MAX_PARTS}")
            if number <= previous:
                raise MultipartError(
                    f"parts must be listed in ascending order ({number} after {previous})",
                    reason="part-order",
                )
            previous = number
        records = self._records(upload_id, [n for n, _ in parts])
        if None in records:
            self.upload(upload_id)  # its parts went with it: completed or aborted meanwhile
        for (number, etag), doc in zip(parts, records, strict=True):
            if doc is None:
                raise MultipartError(f"part {number} was not uploaded")
            if _bare(etag) != doc["etag"]:
                raise MultipartError(f"part {number} has ETag {doc['etag']!r}, not {etag!r}")
        for (number, _), doc in zip(parts[:-1], records[:-1], strict=True):
            assert doc is not None
            if doc["size"] < MIN_PART_SIZE:
                raise MultipartError(
                    f"part {number} is {doc['size']} bytes: every part but the last must"
                    f" be at least {MIN_PART_SIZE} bytes (5 MiB)",
                    reason="too-small",
                )
        docs = [d for d in records if d is not None]
        self.pool.versioned.writable_head(up.branch)
        with self.pool.versioned.writing(_LEASE_OP + upload_id) as since:
            self.upload(upload_id)  # under the lease: not expired meanwhile (expired_uploads)
            blob = self._concatenate(upload_id, docs)
            entry = FileEntry(
                path=up.path,
                size=blob.size,
                etag=multipart_etag([d["etag"] for d in docs]),
                content_type=up.content_type,
                mtime=now_mtime(),
                metadata={**up.metadata, **(metadata or {})},
                object=blob.id,
            )
            # a failed stage may still have landed (a lost reply) or be read meanwhile:
            # the blob stays for vacuum, which frees it past the grace period if no
            # staging entry names it (files_contract.md, E1's change)
            staged = self.pool.stage_entry(
                up.branch, entry, since, if_none_match=if_none_match, if_match=if_match
            )
        self._remove(upload_id)
        return staged

    def _concatenate(self, upload_id: str, docs: Sequence[Mapping[str, Any]]) -> Blob:
        """One new blob under ``data/`` of the parts' bytes, in order."""
        base = self._bytes_dir(upload_id)
        with BlobWriter(self.storage, self.pool.id, hashed=False) as writer:
            for doc in docs:
                path = f"{base}/{doc['blob']}"
                try:
                    local = self.storage.local_path(path)
                    if local is not None:
                        writer.append_file(local)
                    else:
                        for pos in range(0, doc["size"], CHUNK * 8):
                            end = min(doc["size"], pos + CHUNK * 8)
                            writer.write(self.storage.get_range(path, pos, end))
                except (FileNotFoundError, NotFoundError):
                    if not self.storage.exists(f"{self._dir(upload_id)}/upload.json"):
                        raise _no_upload(upload_id) from None  # completed or aborted meanwhile
                    raise NotFoundError(f"the bytes of part upload {path} are gone") from None
            expected = sum(int(d["size"]) for d in docs)
            if writer.size != expected:
                raise NotFoundError(
                    f"the parts of upload {upload_id} hold {writer.size} bytes, not {expected}"
                )
            return writer.publish()


@dataclass(frozen=True)
class ExpiredUpload:
    """An upload :func:`expired_uploads` freed (or would free): its id, its directory
    and the bytes it held."""

    id: str
    path: str
    size: int


def _busy_uploads(pool: _Pool) -> set[str]:
    """The uploads a live process is writing a part of, or completing, right now."""
    return {
        lease.op.removeprefix(_LEASE_OP)
        for lease in pool.versioned.gc.leases.scan()
        if lease.live and lease.op.startswith(_LEASE_OP)
    }


def expired_uploads(
    pool: _Pool,
    older_than: dt.timedelta = DEFAULT_EXPIRY,
    now: dt.datetime | None = None,
    dry_run: bool = False,
) -> list[ExpiredUpload]:
    """Free the uploads idle for more than ``older_than`` (abandoned: S3 leaves this to a
    lifecycle rule; a file pool's vacuum does it, with its grace period) and the leftovers
    of completed or aborted ones, once as old; with ``dry_run`` only say which.

    An upload's age is that of its newest file (its record, a part, a part being
    written), so an upload whose client keeps sending parts is never idle, and one
    whose part or completion is being written by a live process (its lease) is kept
    however long that takes.

    Freeing one is delete-then-recheck, so no part upload that began before it is
    lost: the upload's record goes first (from then on a part upload, which takes
    its lease *before* checking the record, is refused), then the leases are read
    and the upload's files looked at again. A part upload or completion that checked
    the record before it went holds its lease now, or has written a file since the
    cutoff (it finished meanwhile): the record is put back and the upload kept.
    Otherwise nobody can write to it any more and its files are removed."""
    storage = pool.storage
    cutoff = (now or dt.datetime.now(dt.UTC)) - older_than
    top = f"{pool.id}/{UPLOAD_DIR}"
    prefixes = storage.list(top, delimiter="/").prefixes
    busy = _busy_uploads(pool) if prefixes else set()
    removed = []
    for prefix in prefixes:
        upload_id = prefix.rstrip("/").rsplit("/", 1)[-1]
        base = f"{top}/{upload_id}"
        files = _files(storage, base)
        if upload_id in busy or any(info.last_modified > cutoff for info in files):
            continue
        if not dry_run and not _free(pool, upload_id, base, cutoff):
            continue
        removed.append(ExpiredUpload(upload_id, f"{base}/", sum(i.size for i in files)))
    return removed


def _free(pool: _Pool, upload_id: str, base: str, cutoff: dt.datetime) -> bool:
    """Free one idle upload (see :func:`expired_uploads`); False when a writer turned
    up after all (the upload is kept, its record restored)."""
    storage, record = pool.storage, f"{base}/upload.json"
    try:
        kept: bytes | None = storage.get(record)
    except NotFoundError:
        kept = None  # a leftover of a completed or aborted upload
    storage.delete(record)  # first: the upload is gone from then on
    # leases, then files: a writer whose lease ended before the leases were read has
    # written its files before the walk
    busy = upload_id in _busy_uploads(pool)
    if busy or any(i.last_modified > cutoff for i in _files(storage, base)):
        if kept is not None:
            with contextlib.suppress(AlreadyExistsError):
                storage.put_if_absent(record, kept)
        return False
    _remove_tree(storage, base)
    return True


def expire_uploads(
    pool: _Pool, older_than: dt.timedelta = DEFAULT_EXPIRY, now: dt.datetime | None = None
) -> list[str]:
    """The ids of the uploads :func:`expired_uploads` freed."""
    return [e.id for e in expired_uploads(pool, older_than, now)]


def _files(storage: Storage, base: str) -> list[ObjectInfo]:
    """Every file of an upload, partial files of writers at work too."""
    return [*storage.walk(base), *storage.list_partial(base)]


def _remove_tree(storage: Storage, base: str) -> None:
    """Every object under ``base`` (and hidden partial files of writers cut short); on a
    local store its directories too, which would otherwise list as an upload."""
    for info in storage.walk(base):
        storage.delete(info.path)
    for info in storage.list_partial(base):
        storage.delete_partial(info.path)
    local = storage.local_path(base)
    if local is not None:
        for sub in ("blobs", ""):
            with contextlib.suppress(OSError):  # not empty (a writer still at work): kept
                os.rmdir(os.path.join(local, sub) if sub else local)


def _dumps(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, ensure_ascii=False).encode()


def _parallel(fn: Callable[[_T], _R], items: Sequence[_T], threads: bool = True) -> list[_R]:
    """``[fn(x) for x in items]``, on a few threads when there are many (each is one small
    read, which on a remote store is a round trip)."""
    if not threads or len(items) < 8:
        return [fn(x) for x in items]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        return list(pool.map(fn, items))
