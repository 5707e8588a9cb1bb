"""A journal: numbered immutable entries appended with put-if-absent.

Layout under a journal's prefix::

    TAIL            first live entry number (the authority: written once, at creation)
    HEAD            hint: the last entry number some writer saw (may lag, never trusted)
    1, 2, 3 ...     entries, each framed with its number, length and SHA-256
    snap/<n>        snapshots of a reduced state at entry n (written by JournalStore)

A writer appends entry ``head + 1`` with put-if-absent. If another writer got
there first the put fails, the writer learns the new head and tries again, so
entries are contiguous and each is written exactly once. HEAD is corrected by
probing forward (galloping, then bisecting) from the hint, so a stale or missing
hint costs O(log lag) probes, not a listing. A handle that has seen entry ``n``
first probes ``n + 1`` alone: when nothing was appended since, finding the head
costs that one request.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from limno.errors import AlreadyExistsError, CorruptError, LimnoError, NotFoundError
from limno.lazy import lazy_module
from limno.storage import Storage

if TYPE_CHECKING:
    import random

    from limno.faults import Fault
else:
    random = lazy_module("random")  # for writers that lost a race (backoff) only

__all__ = ["Journal", "backoff", "decode_frame", "encode_frame"]

_MAGIC = b"limno-journal"
_VERSION = 1


def encode_frame(n: int, body: bytes) -> bytes:
    """Frame an entry body so truncation, corruption and misplacement are detectable."""
    digest = hashlib.sha256(body).hexdigest()
    header = b"%s %d %d %d %s\n" % (_MAGIC, _VERSION, n, len(body), digest.encode())
    return header + body


def decode_frame(path: str, n: int, data: bytes) -> bytes:
    """The body of a framed entry, or CorruptError naming the object and the fault."""
    head, sep, body = data.partition(b"\n")
    parts = head.split(b" ")
    if not sep or len(parts) != 5 or parts[0] != _MAGIC:
        raise CorruptError(f"{path}: not a limno journal frame (truncated or overwritten)")
    try:
        version, num, length = int(parts[1]), int(parts[2]), int(parts[3])
    except ValueError as e:
        raise CorruptError(f"{path}: unreadable frame header") from e
    if version != _VERSION:
        raise CorruptError(f"{path}: unsupported journal frame version {version}")
    if num != n:
        raise CorruptError(f"{path}: frame says entry {num}, expected {n}")
    if len(body) != length:
        raise CorruptError(f"{path}: truncated: {len(body)} of {length} body bytes")
    if hashlib.sha256(body).hexdigest().encode() != parts[4]:
        raise CorruptError(f"{path}: checksum mismatch")
    return body


class Journal:
    """Append-only numbered entries on an object store."""

    def __init__(self, storage: Storage, prefix: str) -> None:
        self.storage = storage
        self.prefix = prefix.strip("/")
        self._tail: int | None = None
        self._known_head = 0

    # -- paths ---------------------------------------------------------------
    def _path(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    def entry_path(self, n: int) -> str:
        return self._path(str(n))

    def snapshot_path(self, n: int) -> str:
        return self._path(f"snap/{n}")

    # -- lifecycle -----------------------------------------------------------
    def create(self) -> None:
        """Create an empty journal. Raises AlreadyExistsError if one exists."""
        self.storage.put_if_absent(self._path("TAIL"), b"1\n")
        self.storage.put(self._path("HEAD"), b"0\n")
        self._tail = 1

    def exists(self) -> bool:
        return self.storage.exists(self._path("TAIL"))

    def tail(self) -> int:
        """The first live entry number."""
        if self._tail is None:
            path = self._path("TAIL")
            try:
                raw = self.storage.get(path)
            except NotFoundError as e:
                raise NotFoundError(f"no journal at {self.prefix}/ (missing TAIL)") from e
            self._tail = _parse_number(path, raw)
        return self._tail

    # -- reading -------------------------------------------------------------
    def _hint(self) -> int:
        path = self._path("HEAD")
        try:
            return _parse_number(path, self.storage.get(path))
        except (NotFoundError, CorruptError):
            return 0

    def _present(self, n: int) -> bool:
        return self.storage.exists(self.entry_path(n))

    def head(self) -> int:
        """The number of the last entry (``tail - 1`` when empty), found by probing."""
        known = self._known_head
        if known >= self.tail() and not self._present(known + 1):
            return known  # an entry this handle saw, and nothing after it: one probe
        floor = max(self.tail() - 1, known)
        hint = self._hint()
        if hint > floor and self._present(hint):
            floor = hint
        # gallop forward from the highest number known to exist
        step = 1
        hi = floor + 1
        while self._present(hi):
            floor = hi
            step *= 2
            hi = floor + step
        # the answer lies in [floor, hi): bisect
        while hi - floor > 1:
            mid = (floor + hi) // 2
            if self._present(mid):
                floor = mid
            else:
                hi = mid
        self._known_head = floor
        if floor != hint:
            self._write_hint(floor)
        return floor

    def _write_hint(self, n: int) -> None:
        # HEAD is only a hint: failing to write it is harmless
        with contextlib.suppress(LimnoError):
            self.storage.put(self._path("HEAD"), b"%d\n" % n)

    def read(self, n: int) -> bytes:
        """The body of entry ``n`` (verified)."""
        path = self.entry_path(n)
        try:
            data = self.storage.get(path)
        except NotFoundError as e:
            raise NotFoundError(f"journal entry {path} does not exist") from e
        return decode_frame(path, n, data)

    def entries(
        self, start: int | None = None, end: int | None = None
    ) -> Iterator[tuple[int, bytes]]:
        """Entries ``start..end`` inclusive (default: tail..head)."""
        first = self.tail() if start is None else max(start, self.tail())
        last = self.head() if end is None else end
        for n in range(first, last + 1):
            yield n, self.read(n)

    # -- writing -------------------------------------------------------------
    def try_append(self, n: int, body: bytes) -> bool:
        """Write entry ``n`` if nobody has; True when this call wrote it."""
        try:
            self.storage.put_if_absent(self.entry_path(n), encode_frame(n, body))
        except AlreadyExistsError:
            return False
        self._known_head = max(self._known_head, n)
        self._write_hint(n)
        return True

    def append(self, body: bytes, max_attempts: int = 10_000) -> int:
        """Append ``body`` as the next entry and return its number."""
        for attempt in range(max_attempts):
            n = self.head() + 1
            if self.try_append(n, body):
                return n
            backoff(attempt)
        raise AlreadyExistsError(f"journal {self.prefix}/: gave up after {max_attempts} races")

    # -- snapshots -----------------------------------------------------------
    def put_snapshot(self, n: int, body: bytes) -> None:
        self.storage.put(self.snapshot_path(n), encode_frame(n, body))

    def read_snapshot(self, n: int) -> bytes:
        path = self.snapshot_path(n)
        return decode_frame(path, n, self.storage.get(path))

    def snapshot_numbers(self) -> list[int]:
        """Numbers of all stored snapshots (a listing: used by verify and fallbacks)."""
        found = []
        for info in self.storage.walk(self._path("snap")):
            name = info.path.rsplit("/", 1)[-1]
            if name.isdigit():
                found.append(int(name))
        return sorted(found)

    # -- checking ------------------------------------------------------------
    def verify(self) -> Iterator[Fault]:
        """Check every invariant of the journal, yielding each fault found."""
        from limno.faults import Fault  # verify only: reads never load it

        try:
            tail = self.tail()
        except (NotFoundError, CorruptError) as e:
            yield Fault(self._path("TAIL"), str(e))
            return
        hint_path = self._path("HEAD")
        try:
            hint = _parse_number(hint_path, self.storage.get(hint_path))
        except NotFoundError:
            hint = None  # only a hint: a writer killed before writing it is harmless
        except CorruptError as e:
            hint = None
            yield Fault(hint_path, str(e))
        numbers = []
        for info in self.storage.list(self.prefix, delimiter="/").objects:
            name = info.path.rsplit("/", 1)[-1]
            if name.isdigit():
                numbers.append(int(name))
            elif name not in ("HEAD", "TAIL"):
                yield Fault(info.path, "unexpected object in journal")
        numbers.sort()
        last = tail - 1
        for n in numbers:
            if n < tail:
                continue
            if n != last + 1:
                yield Fault(self.entry_path(last + 1), f"missing: gap before entry {n}")
            last = n
            try:
                self.read(n)
            except (CorruptError, NotFoundError) as e:
                yield Fault(self.entry_path(n), str(e).split(": ", 1)[-1])
        if hint is not None and hint > last:
            yield Fault(hint_path, f"HEAD hint {hint} is past the last entry {last}")


def backoff(attempt: int) -> None:
    """Sleep a little after losing a race: jittered, growing, capped at 50 ms."""
    time.sleep(random.uniform(0, min(0.05, 0.001 * (2 ** min(attempt, 6)))))


def _parse_number(path: str, raw: bytes) -> int:
    text = raw.decode("ascii", errors="replace").strip()
    if not text.isdigit() or len(text) > 20:  # int() refuses thousands of digits
        raise CorruptError(f"{path}: expected a number, found {text[:40]!r}")
    return int(text)
