"""Journals: numbered immutable entries with put-if-absent appends, and maps on them."""

from limno.journal._journal import Journal
from limno.journal._store import (
    AssertAbsent,
    AssertEquals,
    AssertPresent,
    JournalStore,
    Put,
    Remove,
    Requirement,
    StoreState,
    Update,
)

__all__ = [
    "AssertAbsent",
    "AssertEquals",
    "AssertPresent",
    "Journal",
    "JournalStore",
    "Put",
    "Remove",
    "Requirement",
    "StoreState",
    "Update",
]
