"""Opening one input for the readers of :mod:`limno.data.readers`: a file or stdin,
decompressed as a stream, with its first bytes peeked at.

The readers need to see an input's first bytes twice (to recognize compression by its
magic bytes, then the format by its content) without losing them, and a stream that
may be stdin or a decompressor cannot seek back. :func:`peek` gives those bytes and a
stream that replays them. Read errors of a decompressor (a truncated or corrupt gzip
or zstd stream) surface while a reader parses, deep in pyarrow or fastavro: the
replaying stream turns them into the one-line input error every bad input gets.
"""

from __future__ import annotations

import gzip
import io
import re
import sys
import zlib
from dataclasses import dataclass
from typing import IO, Any, cast

import zstandard

from limno.data.input_checks import reason
from limno.errors import InvalidInputError

__all__ = ["Input", "decompress", "open_input", "peek"]


class _Replay(io.RawIOBase):
    """A byte stream that first replays bytes already read, and turns read errors of a
    decompressor into one-line input errors."""

    def __init__(self, head: bytes, rest: IO[bytes], name: str, codec: str | None) -> None:
        self._head, self._rest, self._name, self._codec = head, rest, name, codec

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        view = memoryview(buf).cast("B")
        if self._head:
            n = min(len(view), len(self._head))
            view[:n], self._head = self._head[:n], self._head[n:]
            return n
        try:
            data = self._rest.read(len(view))
        except (OSError, EOFError, zlib.error, zstandard.ZstdError) as e:
            what = f"corrupt {self._codec} data" if self._codec else "read failed"
            raise InvalidInputError(f"{self._name}: {what} ({reason(e)})") from None
        view[: len(data)] = data
        return len(data)


def peek(stream: IO[bytes], n: int, name: str, codec: str | None) -> tuple[bytes, IO[bytes]]:
    """Up to ``n`` first bytes of ``stream``, and a stream that still yields them."""
    replay = io.BufferedReader(_Replay(b"", stream, name, codec), buffer_size=1 << 20)
    head = replay.read(n)
    return head, io.BufferedReader(_Replay(head, replay, name, codec), buffer_size=1 << 20)


def open_input(path: str) -> tuple[str, IO[bytes], bool]:
    """(name for messages, raw stream, whether the caller owns it and must close it) of
    ``path`` (``-``: stdin), failing with a one-line input error."""
    if path == "-":
        return "<stdin>", sys.stdin.buffer, False
    try:
        return path, open(path, "rb"), True  # noqa: SIM115 -- closed by read_records
    except FileNotFoundError:
        raise InvalidInputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InvalidInputError(f"{path}: is a directory") from None
    except OSError as e:
        raise InvalidInputError(f"{path}: cannot open ({e.strerror or e})") from None


def decompress(name: str, raw: IO[bytes]) -> tuple[IO[bytes], str | None]:
    """The content of ``raw``, decompressed as a stream if its magic bytes say gzip or
    zstd, and the codec's name (None: plain)."""
    magic, stream = peek(raw, 10, name, None)
    if magic.startswith(b"\x1f\x8b"):
        return cast(IO[bytes], gzip.GzipFile(fileobj=stream, mode="rb")), "gzip"
    if magic.startswith(b"\x28\xb5\x2f\xfd"):
        reader = zstandard.ZstdDecompressor().stream_reader(stream, read_across_frames=True)
        return reader, "zstd"
    for codec, pattern in (("bzip2", rb"BZh[1-9](1AY&SY|\x17rE8P\x90)"), ("xz", rb"\xfd7zXZ\x00")):
        if re.match(pattern, magic):
            raise InvalidInputError(
                f"{name}: {codec} compression is not supported (use gzip or zstd)"
            )
    return stream, None


@dataclass
class Input:
    """One opened input, as each format's reader takes it."""

    name: str  # for messages
    stream: IO[bytes]  # decompressed content, from its first byte
    head: bytes  # its first bytes
    local: str | None  # the path, when the content is a plain local file (seekable)
