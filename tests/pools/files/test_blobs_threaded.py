"""``blobs.ThreadedDigest``: large chunks hashed in a worker thread, in order, give the
digest of the whole stream, also when the caller reuses its buffer at once."""

from __future__ import annotations

import hashlib
import os
import zlib

from limno.pools.files.blobs import THREADED_HASH, ThreadedDigest


class _Crc:
    def __init__(self) -> None:
        self.value = 0

    def update(self, data: bytes) -> None:
        self.value = zlib.crc32(data, self.value)


def test_same_digest_as_one_thread_in_order() -> None:
    data = os.urandom(5 * THREADED_HASH + 123)
    sizes = [10, THREADED_HASH, 3 * THREADED_HASH, 7, THREADED_HASH + 100]
    md5 = ThreadedDigest(hashlib.md5(usedforsecurity=False))
    crc = ThreadedDigest(_Crc())
    buffer = bytearray(max(sizes))
    pos = 0
    for size in sizes:
        piece = data[pos : pos + size]
        buffer[:size] = piece
        view = memoryview(buffer)[:size]
        md5.update(view)  # a view of a buffer the caller overwrites right after
        crc.update(piece)
        buffer[:size] = b"\0" * size
        pos += size
    md5.update(memoryview(data)[pos:])  # a view of bytes: no copy needed
    crc.update(data[pos:])
    assert md5.result().hexdigest() == hashlib.md5(data).hexdigest()
    assert crc.result().value == zlib.crc32(data)
