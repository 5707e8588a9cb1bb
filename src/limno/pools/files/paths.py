"""Paths of a file pool: what a path may be, and how listings move through them.

A path is an S3 object key: any UTF-8 text of 1 to 1,024 bytes. limno adds only that it
has no NUL (a byte many tools cannot pass). Everything else S3 allows is a path as it
is, never normalized: ``a/../b``, ``//x``, `` spaced``, ``dir/`` and unicode are all
distinct paths, because S3 clients (Spark's committers, the AWS CLI) rely on keys
coming back exactly as they were written.

Paths sort as Python strings, by code point, which is the order of their UTF-8 bytes
(the order S3 lists keys in), so a snapshot's key order is the listing order.
"""

from __future__ import annotations

from limno.errors import InvalidInputError

__all__ = [
    "MAX_PATH_BYTES",
    "parse_address",
    "prefix_end",
    "validate_path",
    "validate_prefix",
]

#: S3's limit on a key's length, in UTF-8 bytes
MAX_PATH_BYTES = 1024


def validate_path(path: str) -> str:
    """``path`` if it can name a file (see the module docstring), else InvalidInputError."""
    if not isinstance(path, str) or not path:
        raise InvalidInputError("a file path must not be empty")
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInputError(f"file path {path!r:.80} is not valid UTF-8") from None
    if size > MAX_PATH_BYTES:
        raise InvalidInputError(
            f"file path {path[:40]!r}... is {size} bytes long (at most {MAX_PATH_BYTES})"
        )
    if "\x00" in path:
        raise InvalidInputError(f"file path {path!r:.80} contains a NUL character")
    return path


def validate_prefix(prefix: str) -> str:
    """A listing prefix: empty, or anything a path may start with."""
    if prefix:
        validate_path(prefix)
    return prefix


def prefix_end(prefix: str) -> str | None:
    """The least string greater than every string starting with ``prefix`` (None if no
    string is: the prefix is empty or all U+10FFFF): where a listing resumes after
    skipping everything under a prefix."""
    while prefix and prefix[-1] == "\U0010ffff":
        prefix = prefix[:-1]
    if not prefix:
        return None
    last = ord(prefix[-1]) + 1
    if 0xD800 <= last <= 0xDFFF:  # surrogates are no path's characters: skip over them
        last = 0xE000
    return prefix[:-1] + chr(last)


def parse_address(text: str, default_ref: str = "main") -> tuple[str, str, str]:
    """``POOL[@REF][/PATH]`` -> ``(pool, ref, path)``: a file's address on the command
    line and in the HTTP API. Pool names and refs never hold ``/``, so the first ``/``
    starts the path (which may be empty: the pool's root)."""
    head, slash, path = text.partition("/")
    pool, at, ref = head.partition("@")
    if not pool:
        raise InvalidInputError(f"invalid file address {text!r}: no pool before '@' or '/'")
    if at and not ref:
        raise InvalidInputError(f"invalid file address {text!r}: nothing after '@'")
    return pool, ref or default_ref, path if slash else ""
