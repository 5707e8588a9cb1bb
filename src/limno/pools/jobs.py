"""The job tracker: what background maintenance did, kept in the lake (Sleeper's trackers).

Each job (a compaction, a partition split, a vacuum) is a record in a journal
store at ``<pool-id>/jobs/``, keyed by job id and updated as it moves through
``created → started → finished → committed`` (or ``failed``), with rows in and
out, duration and the commit it made. The journal keeps every transition with a
timestamp, so reports can show both the latest state and the history.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from limno.errors import AlreadyExistsError
from limno.journal import JournalStore, Put
from limno.storage import Storage

__all__ = ["JobRecord", "JobTracker"]

STATES = ("created", "started", "finished", "committed", "failed")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


@dataclass
class JobRecord:
    """Where a job stands."""

    id: str
    kind: str
    state: str = "created"
    created: str = ""
    updated: str = ""
    partition: str | None = None
    inputs: int = 0
    rows_in: int = 0
    rows_out: int = 0
    seconds: float = 0.0
    commit: str | None = None
    error: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> JobRecord:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


class JobTracker:
    """The jobs of one pool."""

    def __init__(self, storage: Storage, pool_id: str) -> None:
        self.store = JournalStore(storage, f"{pool_id}/jobs")

    def _ensure(self) -> None:
        if not self.store.exists():
            with suppress(AlreadyExistsError):
                self.store.create()

    def put(self, record: JobRecord) -> None:
        self._ensure()
        record.updated = _now()
        record.created = record.created or record.updated
        self.store.commit([Put(record.id, record.to_json())])

    def jobs(self) -> list[JobRecord]:
        """Every job's latest record, oldest first."""
        if not self.store.exists():
            return []
        items = self.store.state().items
        return sorted((JobRecord.from_json(v) for v in items.values()), key=lambda r: r.created)

    @contextmanager
    def track(self, record: JobRecord) -> Iterator[JobRecord]:
        """Record ``record`` as created and started; finished (or failed) on exit.

        The body fills in rows, commit and detail; an exception is recorded with
        its message and re-raised.
        """
        self.put(record)
        record.state = "started"
        self.put(record)
        began = time.monotonic()
        try:
            yield record
        except BaseException as e:
            record.state = "failed"
            record.error = f"{type(e).__name__}: {e}"
            record.seconds = time.monotonic() - began
            self.put(record)
            raise
        record.seconds = time.monotonic() - began
        record.state = "committed" if record.commit else "finished"
        self.put(record)
