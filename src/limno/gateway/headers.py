"""A case-insensitive view of request headers, whatever shape they arrive in.

The signers and the body checks read headers by lower-case name, and must see a header
repeated on the wire the way AWS does when it signs (values joined with ``,``). ASGI hands
headers over as ``(bytes, bytes)`` pairs, tests as dicts: :meth:`HeaderMap.of` takes either,
so no caller converts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Union
from urllib.parse import unquote_to_bytes

__all__ = ["HeaderMap", "HeadersLike", "percent_decode", "query_pairs", "wire_bytes"]

#: what the protocol functions accept as headers
HeadersLike = Union[
    "HeaderMap",
    Mapping[str, str],
    Iterable[tuple[str, str]],
    Iterable[tuple[bytes, bytes]],
]


def _text(value: str | bytes) -> str:
    # HTTP header bytes are latin-1 on the wire (ASGI passes them undecoded)
    return value.decode("latin-1") if isinstance(value, bytes) else value


class HeaderMap:
    """Headers by lower-case name, each with every value it was sent with, in order."""

    __slots__ = ("_values",)

    def __init__(self, pairs: Iterable[tuple[str | bytes, str | bytes]] = ()) -> None:
        self._values: dict[str, list[str]] = {}
        for name, value in pairs:
            self._values.setdefault(_text(name).lower(), []).append(_text(value))

    @classmethod
    def of(cls, headers: HeadersLike) -> HeaderMap:
        """The headers as a :class:`HeaderMap` (returned as is when already one)."""
        if isinstance(headers, HeaderMap):
            return headers
        if isinstance(headers, Mapping):
            return cls(headers.items())
        return cls(headers)

    def get(self, name: str, default: str | None = None) -> str | None:
        """The value of ``name``; a header sent more than once has its values joined by ``,``."""
        values = self._values.get(name.lower())
        return ",".join(values) if values else default

    def getall(self, name: str) -> list[str]:
        """Every value ``name`` was sent with, in order (``[]`` when absent)."""
        return list(self._values.get(name.lower(), ()))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def items(self) -> Iterator[tuple[str, str]]:
        """``(lower-case name, joined value)`` for every header."""
        for name, values in self._values.items():
            yield name, ",".join(values)


def wire_bytes(text: str) -> bytes:
    """The bytes a raw path or query string was sent as.

    ASGI hands them over as bytes, which the gateway decodes as latin-1 (one char per byte);
    a caller that passes real Unicode text gets its UTF-8 instead.
    """
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


def percent_decode(text: str, *, strict: bool = False) -> str:
    """Percent-decode a raw path or query part to text (UTF-8). ``strict`` raises
    ``UnicodeDecodeError`` for bytes that are not UTF-8, else they become U+FFFD."""
    return unquote_to_bytes(wire_bytes(text)).decode("utf-8", "strict" if strict else "replace")


def query_pairs(raw_query: str | bytes, *, decode: bool = True) -> list[tuple[str, str]]:
    """The ``name=value`` pairs of a query string in the order sent, a bare ``name`` giving
    ``""``. ``decode`` percent-decodes both sides (``+`` stays a plus: S3 query strings are
    not form-encoded, and the signers encode a space as ``%20``)."""
    text = _text(raw_query)
    pairs: list[tuple[str, str]] = []
    for item in text.split("&"):
        if not item:
            continue
        name, _, value = item.partition("=")
        if decode:
            name, value = percent_decode(name), percent_decode(value)
        pairs.append((name, value))
    return pairs
