"""What a new process has not decoded yet: a test that counts the reads of a first
page "in a new process" drops the caches of decoded snapshots, scan views, memos and
snapshot ranges of this one (until the test ends)."""

from __future__ import annotations

import pytest

from limno.core import committed
from limno.pools.records import snapshot_cache

_CACHES = (
    (snapshot_cache, ("_snapshots", "_views", "_memos", "_key_types")),
    (committed, ("_ranges", "_metaranges", "_seek_index")),
)


def forget_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Empty caches in place of this process's, as a new process starts with."""
    for module, names in _CACHES:
        for name in names:
            size = getattr(module, name)._size
            monkeypatch.setattr(module, name, committed._LRU(size))
