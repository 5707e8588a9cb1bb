"""KSUIDs: 27-character, time-ordered, globally unique ids for pools, commits, objects.

Four bytes of seconds since the KSUID epoch (2014-05-13) followed by sixteen random
bytes, base62-encoded to a fixed width, so ids sort by creation second.
"""

from __future__ import annotations

import os
import time

__all__ = ["is_ksuid", "ksuid", "ksuid_time"]

_EPOCH = 1_400_000_000
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_WIDTH = 27


def ksuid(at: float | None = None) -> str:
    """A new KSUID (for the given Unix time, default now)."""
    seconds = int(time.time() if at is None else at) - _EPOCH
    raw = seconds.to_bytes(4, "big") + os.urandom(16)
    n = int.from_bytes(raw, "big")
    out = []
    while n:
        n, r = divmod(n, 62)
        out.append(_ALPHABET[r])
    return "".join(reversed(out)).rjust(_WIDTH, "0")


def is_ksuid(text: str) -> bool:
    """Whether ``text`` has the shape of a KSUID."""
    return len(text) == _WIDTH and all(c in _ALPHABET for c in text)


def ksuid_time(text: str) -> float:
    """The Unix time (seconds) a KSUID was made at (by its maker's clock)."""
    n = 0
    for c in text:
        n = n * 62 + _ALPHABET.index(c)
    return float((n >> 128) + _EPOCH)
