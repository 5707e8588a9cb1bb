"""Sizes and durations as people write them, parsed one way everywhere.

Sizes (``--target-size``, ``LIMNO_SPARK_THRESHOLD``, ...): a number of bytes with
an optional unit. ``KB``, ``MB``, ``GB``, ``TB`` are powers of 1000 and ``KiB``,
``MiB``, ``GiB``, ``TiB`` powers of 1024, as the IEC defines them (``K``, ``M``,
``G``, ``T`` alone mean the decimal ones; case does not matter); ``1.5GB`` is
allowed, a bare number is bytes.

Durations (``vacuum --grace``, ``--retention``, ``manage --interval``,
``age-off(ts,...)``): one or more parts ``<number><unit>`` with units ``ms``,
``s``, ``m``, ``h``, ``d``, ``w`` (``90s``, ``15m``, ``1d12h``, ``1.5h``); a bare
number is seconds.
"""

from __future__ import annotations

import datetime as dt
import re

from limno.errors import InvalidInputError

__all__ = ["check_time", "format_size", "parse_duration", "parse_size"]

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*([kmgt]i?)?b?\s*", re.IGNORECASE)
_POWERS = {"k": 1, "m": 2, "g": 3, "t": 4}
_NUMBER = re.compile(r"\d+(?:\.\d+)?|\.\d+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h|d|w)")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_size(text: str) -> int:
    """``256MiB``, ``1GB``, ``64k``, ``1000`` → bytes (see the module docstring)."""
    m = _SIZE.fullmatch(text)
    if not m:
        raise InvalidInputError(
            f"invalid size {text!r} (a number of bytes, or with a unit: 512MB, 256MiB, 2GB)"
        )
    unit = (m.group(2) or "").lower()
    base = 1024 if unit.endswith("i") else 1000
    return int(float(m.group(1)) * base ** _POWERS.get(unit[:1], 0))


def format_size(n: int) -> str:
    """Bytes for people: ``268435456`` → ``256MiB``, ``1000000`` → ``1MB``."""
    for unit, power in (("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)):
        if n and n % 1024**power == 0:
            return f"{n // 1024**power}{unit}"
    for unit, power in (("TB", 4), ("GB", 3), ("MB", 2), ("KB", 1)):
        if n and n % 1000**power == 0:
            return f"{n // 1000**power}{unit}"
    return f"{n}B"


def parse_duration(text: str) -> dt.timedelta:
    """``15m``, ``1d12h``, ``90s``, ``0`` → a timedelta (see the module docstring)."""
    t = text.strip().lower()
    if _NUMBER.fullmatch(t):
        t += "s"
    parts = _DURATION_PART.findall(t)
    if not t or "".join(n + u for n, u in parts) != t:
        raise InvalidInputError(f"invalid duration {text!r} (e.g. 90s, 15m, 2h, 1d12h, 30d)")
    try:
        return dt.timedelta(seconds=sum(float(n) * _SECONDS[u] for n, u in parts))
    except OverflowError:
        raise InvalidInputError(f"duration {text!r} is too long") from None


def check_time(when: object) -> None:
    """An ``as_of`` of the Python API is a datetime: a string failed deep inside (an
    AttributeError), in process and through a server alike."""
    if not isinstance(when, dt.datetime):
        raise InvalidInputError(
            f"as_of is a datetime, not a {type(when).__name__} (datetime.fromisoformat(...))"
        )
