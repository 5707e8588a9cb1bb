"""Completion records: what an ETL consumed and what waits, in the output pool's commit meta.

Every commit of ``limno etl`` carries, under the meta key ``etl``, one entry per
config name (several configs may write to one pool)::

    {"etl": {"invoices": {
        "consumed": {"Invoices": {"0": 4}, "InvoiceStatus": {"0": 3}},
        "pending": {"0": [["Invoices", 0, 4]]},
        "next": {"NewInvoices": 3}}}}

* ``consumed``: per input topic and partition, the last offset read (the full map);
* ``pending``: per denorm rule (its index in ``transforms``), the events that passed
  its ``where`` and wait for a partner: ``[topic, partition, offset]``;
* ``next``: per output topic, the ``kafka.offset`` its next record gets.

The same commit records, under ``etl_read``, what the run read of each input branch
(``{"invoices": {"Raw@main": {"commit": ID, "topics": [...]}}}``): a hint for the next
run's reads (:mod:`.reads`), kept apart from the entry above, which says what was
processed and is the same whatever lake or engine ran it.

The output records and this entry are one commit, so they are never apart: a crash
before the commit loses both (the rerun does the work again), after it neither.
A run reads the newest commit of the output branch whose meta names its config
(normally the head; commits of others, compactions say, are passed over).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from limno.errors import CorruptError

if TYPE_CHECKING:
    from limno.api import Pool

__all__ = ["META_KEY", "READ_KEY", "Read", "State", "read_state"]

META_KEY = "etl"
READ_KEY = "etl_read"
#: per input pool@branch, the commit a run read and the topics it read there
Read = dict[str, dict[str, Any]]
_FIRST_LOOK = 4


@dataclass
class State:
    """Where a config's runs stand; ``commit``: the commit it was read from (None: none)."""

    consumed: dict[str, dict[int, int]] = field(default_factory=dict)
    pending: dict[int, list[tuple[str, int, int]]] = field(default_factory=dict)
    next: dict[str, int] = field(default_factory=dict)
    commit: str | None = None
    read: Read = field(default_factory=dict)

    def meta(self, name: str) -> dict[str, Any]:
        """The commit meta recording this state for config ``name``."""
        read = {READ_KEY: {name: self.read}} if self.read else {}
        return {
            **read,
            META_KEY: {
                name: {
                    "consumed": {
                        t: {str(p): o for p, o in sorted(parts.items())}
                        for t, parts in sorted(self.consumed.items())
                    },
                    "pending": {
                        str(k): [list(e) for e in sorted(events)]
                        for k, events in sorted(self.pending.items())
                        if events
                    },
                    "next": dict(sorted(self.next.items())),
                }
            },
        }


def read_state(pool: Pool, branch: str, name: str) -> State:
    """Config ``name``'s state in ``branch``'s history (a new state: none there)."""
    limit = _FIRST_LOOK
    while True:
        commits = pool.log(branch, limit=limit)
        for commit in commits:
            entry = commit.meta.get(META_KEY)
            if isinstance(entry, Mapping) and name in entry:
                try:
                    return _parse(entry[name], commit.id, _read(commit.meta.get(READ_KEY), name))
                except (TypeError, ValueError, KeyError, AttributeError):
                    raise CorruptError(
                        f"commit {commit.id}: its meta {META_KEY}.{name} is not an etl state"
                    ) from None
        if len(commits) < limit:
            return State()
        limit *= 16


def _read(entry: Any, name: str) -> Read:
    """The ``etl_read`` hint of config ``name`` (empty when missing or not one: it only
    saves reading, so a run without it reads its inputs whole)."""
    mine = entry.get(name) if isinstance(entry, Mapping) else None
    if not isinstance(mine, Mapping):
        return {}
    return {
        str(ref): {"commit": seen["commit"], "topics": list(seen["topics"])}
        for ref, seen in mine.items()
        if isinstance(seen, Mapping)
        and isinstance(seen.get("commit"), str)
        and isinstance(seen.get("topics"), list)
        and all(isinstance(t, str) for t in seen["topics"])
    }


def _parse(entry: Any, commit: str, read: Read) -> State:
    consumed = {
        str(t): {int(p): _int(o) for p, o in parts.items()}
        for t, parts in entry["consumed"].items()
    }
    pending = {
        int(k): [(str(t), _int(p), _int(o)) for t, p, o in events]
        for k, events in entry["pending"].items()
    }
    nexts = {str(t): _int(n) for t, n in entry["next"].items()}
    return State(consumed, pending, nexts, commit, read)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(value)
    return value
