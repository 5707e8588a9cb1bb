"""A merge's rounds are bounded, and a read-ahead merge starts on every core.

Both shorten the wait before a compaction's encoder gets its first rows: a round of
an integer key holds about ``kway.ROUND_ROWS`` rows (its watermark lowered to a key
every source's chunk passes), and the sources' first batches decode in a pool of
their own. Neither may change what comes out: the stable sort of all the rows.
"""

from __future__ import annotations

import threading
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.data import kway
from limno.data import scan as _scan
from limno.data import writer as _writer
from limno.data.keys import PoolKey
from limno.data.kway import merge_sorted
from limno.storage import open_storage

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ids(tables: list[pa.Table]) -> list[int]:
    return [i for t in tables for i in t.column("id").to_pylist()]


def _sources(lists: list[list[int | None]], key: PoolKey) -> list[pa.Table]:
    out, start = [], 0
    for values in lists:
        ids = pa.array(range(start, start + len(values)), pa.int64())
        out.append(key.sort(pa.table({"id": ids, "k": pa.array(values, pa.int64())})))
        start += len(values)
    return out


@SETTINGS
@given(
    lists=st.lists(
        st.lists(st.one_of(st.none(), st.integers(0, 12)), max_size=30), min_size=2, max_size=5
    ),
    chunk=st.integers(1, 9),
    cap=st.integers(1, 8),
    descending=st.booleans(),
)
def test_capped_rounds_give_the_stable_sort(
    lists: list[list[int | None]], chunk: int, cap: int, descending: bool
) -> None:
    key = PoolKey.parse("k:desc" if descending else "k")
    sources = _sources(lists, key)
    fed = [[s.slice(i, chunk) for i in range(0, s.num_rows, chunk)] for s in sources]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kway, "ROUND_ROWS", cap)
        merged = list(merge_sorted(fed, key))
    assert _ids(merged) == _ids([key.sort(pa.concat_tables(sources))])


def test_a_round_of_distinct_keys_holds_about_round_rows() -> None:
    key = PoolKey.parse("k")
    # four sources of 1,000 distinct keys each, interleaved: an unbounded first round
    # would hold every row below the least chunk end (nearly all of them)
    lists: list[list[int | None]] = [list(range(i, 4000, 4)) for i in range(4)]
    sources = _sources(lists, key)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kway, "ROUND_ROWS", 100)
        rounds = list(merge_sorted([[s] for s in sources], key))
    assert max(t.num_rows for t in rounds) <= 100 + len(sources)
    assert len(rounds) >= 4000 // 104
    assert _ids(rounds) == _ids([key.sort(pa.concat_tables(sources))])
    unbounded = list(merge_sorted([[s] for s in sources], key))
    assert unbounded[0].num_rows > 3900  # well under ROUND_ROWS: one round, up to 3,996


def test_read_ahead_decodes_first_batches_in_their_own_pool() -> None:
    key = PoolKey.parse("a")
    store = open_storage(f"memory://{uuid.uuid4().hex}")
    objs = []
    for i in range(3):
        t = pa.table({"id": list(range(i * 100, i * 100 + 100)), "a": list(range(i, 300, 3))})
        objs += _writer.write_sorted(store, "pool", [t], key, 10**9, row_group_rows=10)
    threads: list[str] = []
    real = _scan._Reader._read

    def spy(self: _scan._Reader, pf: object, groups: list[int]) -> pa.Table:
        threads.append(threading.current_thread().name)
        return real(self, pf, groups)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_scan._Reader, "_read", spy)
        ahead = list(_scan.scan(store, "pool", objs, key, read_ahead=True))
    plain = list(_scan.scan(store, "pool", objs, key))
    assert _ids(ahead) == _ids(plain)
    assert sorted(_ids(ahead)) == list(range(300))
    first = [n for n in threads if n.startswith("limno-read-first")]
    assert len(first) == len(objs)  # one first batch per object, then the read-ahead pool
    assert any(n.startswith("limno-read-ahead") for n in threads)
    assert not [t for t in threading.enumerate() if t.name.startswith("limno-read-")]
