"""Key values of nanosecond precision, exact in Python.

Python's ``datetime``, ``time`` and ``timedelta`` stop at microseconds, while Arrow
and Parquet store timestamps, times and durations in nanoseconds too. A pool key
turns its values into Python values for object metadata (min/max key), bounds,
point lookups and the k-way merge; truncated there, distinct keys would compare
equal, an object's max key would sort before its last row, and merges would
misorder rows. So a value with nanoseconds becomes a subclass that carries them
(:class:`NanoDatetime`, :class:`NanoTime`, :class:`NanoTimedelta`), and key
comparisons (:class:`~limno.data.keys.SortKey`) break microsecond ties on
:func:`nanos`, which also reads pandas' Timestamp and Timedelta (what pyarrow returns
for nanosecond values when pandas is installed). A value without nanoseconds stays a
plain ``datetime``, ``time`` or ``timedelta``.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING, Any

from limno.errors import InvalidInputError
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")

__all__ = [
    "NanoDatetime",
    "NanoTime",
    "NanoTimedelta",
    "micro",
    "nanos",
    "parse_datetime",
    "python_value",
]

_FRACTION = re.compile(r"(\.\d{6})(\d{1,3})")  # microseconds, then up to 3 more digits


def _with_nanos(iso: str, ns: int) -> str:
    """ISO text with a 6-digit fraction, ``ns`` appended to the fraction."""
    head, _, rest = iso.partition(".")
    return f"{head}.{rest[:6]}{ns:03d}{rest[6:]}"


class NanoDatetime(dt.datetime):
    """A datetime with ``nanosecond`` (1-999) beyond its microsecond."""

    nanosecond: int

    def __new__(cls, base: dt.datetime, nanosecond: int) -> NanoDatetime:
        self = super().__new__(
            cls,
            base.year,
            base.month,
            base.day,
            base.hour,
            base.minute,
            base.second,
            base.microsecond,
            base.tzinfo,
            fold=base.fold,
        )
        self.nanosecond = nanosecond
        return self

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return NanoDatetime, (micro(self), self.nanosecond)

    def __repr__(self) -> str:
        return f"NanoDatetime({micro(self)!r}, {self.nanosecond})"

    def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:
        return _with_nanos(micro(self).isoformat(sep, "microseconds"), self.nanosecond)


class NanoTime(dt.time):
    """A time of day with ``nanosecond`` (1-999) beyond its microsecond."""

    nanosecond: int

    def __new__(cls, base: dt.time, nanosecond: int) -> NanoTime:
        self = super().__new__(
            cls, base.hour, base.minute, base.second, base.microsecond, base.tzinfo
        )
        self.nanosecond = nanosecond
        return self

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return NanoTime, (micro(self), self.nanosecond)

    def __repr__(self) -> str:
        return f"NanoTime({micro(self)!r}, {self.nanosecond})"

    def isoformat(self, timespec: str = "auto") -> str:
        return _with_nanos(micro(self).isoformat("microseconds"), self.nanosecond)


class NanoTimedelta(dt.timedelta):
    """A duration with ``nanoseconds`` (1-999) beyond its microseconds (pandas' name)."""

    nanoseconds: int

    def __new__(cls, base: dt.timedelta, nanoseconds: int) -> NanoTimedelta:
        self = super().__new__(cls, base.days, base.seconds, base.microseconds)
        self.nanoseconds = nanoseconds
        return self

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return NanoTimedelta, (micro(self), self.nanoseconds)

    def __repr__(self) -> str:
        return f"NanoTimedelta({micro(self)!r}, {self.nanoseconds})"


def nanos(v: Any) -> int:
    """Nanoseconds beyond the microsecond of a temporal value (0 for plain ones)."""
    if isinstance(v, dt.timedelta):
        return int(getattr(v, "nanoseconds", 0))
    return int(getattr(v, "nanosecond", 0))


def micro(v: Any) -> Any:
    """A temporal value as the plain Python value of its microseconds."""
    if isinstance(v, dt.datetime):
        return dt.datetime(
            v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond, v.tzinfo, fold=v.fold
        )
    if isinstance(v, dt.time):
        return dt.time(v.hour, v.minute, v.second, v.microsecond, v.tzinfo)
    if isinstance(v, dt.timedelta):
        return dt.timedelta(v.days, v.seconds, v.microseconds)
    return v


def python_value(scalar: pa.Scalar) -> Any:
    """A key value as Python: exact for nanosecond types (see the module), and a
    one-line error for a date beyond Python's (years 1 to 9999)."""
    t = scalar.type
    try:
        if getattr(t, "unit", None) != "ns" or not scalar.is_valid:
            return scalar.as_py()
        us, ns = divmod(scalar.cast(pa.int64()).as_py(), 1000)  # floor: ns >= 0
        if pa.types.is_duration(t):
            base = dt.timedelta(microseconds=us)
            return NanoTimedelta(base, ns) if ns else base
        if pa.types.is_timestamp(t):
            stamp = pa.scalar(us, pa.int64()).cast(pa.timestamp("us", t.tz)).as_py()
            return NanoDatetime(stamp, ns) if ns else stamp
        clock = pa.scalar(us, pa.int64()).cast(pa.time64("us")).as_py()
        return NanoTime(clock, ns) if ns else clock
    except (OverflowError, ValueError) as e:
        raise InvalidInputError(
            f"key value {scalar} of type {t} has no Python value ({e}): a key's dates must"
            " lie in the years 1 to 9999"
        ) from None


def parse_datetime(text: str) -> dt.datetime:
    """ISO 8601 text as a datetime, nanoseconds kept (Python drops digits past 6)."""
    m = _FRACTION.search(text)
    if m is None:
        return dt.datetime.fromisoformat(text)
    ns = int(m.group(2).ljust(3, "0"))
    base = dt.datetime.fromisoformat(text[: m.end(1)] + text[m.end(2) :])
    return NanoDatetime(base, ns) if ns else base
