"""The lake: a root location holding ``lake.json`` and the journal of pools.

``Lake.init`` creates one; ``Lake.open`` opens one and refuses anything that is
not a lake of a format version it understands. Everything else in limno hangs off
a :class:`Lake`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Iterator

from limno.config import lake_location
from limno.errors import AlreadyExistsError, CorruptError, InvalidInputError, NotFoundError
from limno.faults import Fault
from limno.journal import JournalStore
from limno.storage import Storage, open_storage

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "Lake"]

FORMAT_NAME = "limno"
FORMAT_VERSION = 1
LAKE_JSON = "lake.json"
POOLS_PREFIX = "pools"


class Lake:
    """An opened lake."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.pools_journal = JournalStore(storage, POOLS_PREFIX)

    @property
    def uri(self) -> str:
        return self.storage.uri

    @classmethod
    def init(cls, location: str | None = None) -> Lake:
        """Create a lake at ``location``. Raises AlreadyExistsError if one is there."""
        storage = open_storage(lake_location(location), create=True)
        if storage.exists(LAKE_JSON):
            raise AlreadyExistsError(f"a lake already exists at {storage.uri}")
        lake = cls(storage)
        if not lake.pools_journal.exists():
            # a concurrent init may have made it; lake.json decides who wins below
            with contextlib.suppress(AlreadyExistsError):
                lake.pools_journal.create()
        doc = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        try:
            storage.put_if_absent(LAKE_JSON, json.dumps(doc, indent=2).encode() + b"\n")
        except AlreadyExistsError as e:
            raise AlreadyExistsError(f"a lake already exists at {storage.uri}") from e
        return lake

    @classmethod
    def open(cls, location: str | None = None) -> Lake:
        """Open the lake at ``location`` (resolved by :func:`lake_location`)."""
        where = lake_location(location)
        try:
            storage = open_storage(where)
        except NotFoundError as e:
            raise NotFoundError(f"no lake at {where} (run 'limno init')") from e
        try:
            raw = storage.get(LAKE_JSON)
        except NotFoundError as e:
            raise NotFoundError(f"no lake at {storage.uri} (run 'limno init')") from e
        check_lake_json(storage.uri, raw)
        return cls(storage)

    def verify(self) -> Iterator[Fault]:
        """Every broken invariant of the lake, each as a :class:`Fault`."""
        try:
            check_lake_json(self.uri, self.storage.get(LAKE_JSON))
        except (NotFoundError, CorruptError, InvalidInputError) as e:
            yield Fault(LAKE_JSON, str(e))
        yield from self.pools_journal.verify()


def check_lake_json(uri: str, raw: bytes) -> dict[str, object]:
    """Parse ``lake.json`` or raise CorruptError saying what is wrong with it."""
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise CorruptError(f"{uri}/{LAKE_JSON}: not valid JSON ({e})") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise CorruptError(f"{uri}/{LAKE_JSON}: not a limno lake descriptor")
    version = doc.get("version")
    if version != FORMAT_VERSION:
        raise CorruptError(
            f"{uri}/{LAKE_JSON}: format version {version!r}; this limno reads {FORMAT_VERSION}"
        )
    return doc
