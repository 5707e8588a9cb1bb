"""Object storage: one interface, backends chosen by URI scheme.

``open_storage("/path")`` or ``file:///path`` opens a local directory,
``memory://name`` a process-local store, ``s3://bucket/prefix`` an S3 bucket.
Backends are imported lazily so that a local lake never loads S3 code paths.
With ``LIMNO_FAULTS`` set, every store is wrapped in the fault-injection layer
(:mod:`limno.storage._faults`; for tests).
"""

from __future__ import annotations

import os

from limno.errors import InvalidInputError
from limno.storage._base import ListResult, ObjectInfo, Storage

__all__ = ["ListResult", "ObjectInfo", "Storage", "open_storage"]


def open_storage(uri: str, create: bool = False) -> Storage:
    """Open the store a URI names; ``create`` makes a missing local directory."""
    store = _open(uri, create)
    faults = os.environ.get("LIMNO_FAULTS")
    if faults:
        from limno.storage._faults import FaultyStorage, parse_rules

        return FaultyStorage(store, parse_rules(faults), exit_on_crash=True)
    return store


def _open(uri: str, create: bool) -> Storage:
    if not uri:
        raise InvalidInputError("empty storage location")
    if "://" not in uri:
        from limno.storage._obstore import local_storage

        return local_storage(uri, create)
    from urllib.parse import unquote, urlparse  # a plain path (the usual lake) needs neither

    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    if scheme == "file":
        from limno.storage._obstore import local_storage

        return local_storage(unquote(parsed.path), create)
    if scheme == "memory":
        from limno.storage._obstore import memory_storage

        return memory_storage(parsed.netloc + parsed.path)
    if scheme in ("s3", "s3a"):
        from limno.storage._obstore import s3_storage

        if not parsed.netloc:
            raise InvalidInputError(f"no bucket in {uri!r}")
        return s3_storage(parsed.netloc, parsed.path)
    raise InvalidInputError(f"unsupported storage scheme {scheme!r} in {uri!r}")
