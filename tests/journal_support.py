"""What the journal tests share: reading a journal's state back the way verify sees it."""

from __future__ import annotations

from limno.faults import Fault
from limno.journal import JournalStore
from limno.storage import Storage


def entry_numbers(storage: Storage, prefix: str) -> list[int]:
    """The numbered entries of the journal at ``prefix`` that exist in ``storage``, sorted."""
    names = [o.path.rsplit("/", 1)[-1] for o in storage.list(prefix, delimiter="/").objects]
    return sorted(int(n) for n in names if n.isdigit())


def verify_faults(js: JournalStore) -> list[Fault]:
    return list(js.verify())
