"""A snapshot's scan plan made whole in bulk from its ranges' text (data/plan_bulk.py) is
exactly the plan table of its decoded objects (``plan_table(Plan(...))``): random
snapshots of overlapping, keyless and unkeyed objects, integer, text and two-field
descending keys, compaction outputs (a recorded order, replaces), texts that need
escapes (their ranges decoded the usual way); and a real pool's first reader stores
that table, or plans the usual way where bulk does not apply (partitions, float keys)."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fresh_process import forget_decoded
from limno.core import committed
from limno.core.committed import Snapshots
from limno.data import plan_bulk
from limno.data.indexes import INDEX_PREFIX
from limno.data.keys import PoolKey
from limno.data.objects import DataObject
from limno.data.plan_index import plan_ipc, plan_table
from limno.data.scan_plan import Plan
from limno.lake import Lake
from limno.pools.records import snapshot_cache, snapshot_index
from limno.pools.records.partitions import PARTITION_PREFIX
from limno.storage import open_storage

SKIP = (PARTITION_PREFIX, INDEX_PREFIX)
SCHEMAS = ["c2NoZW1hQQ==", "c2NoZW1hQg==", ""]
#: texts a stored range writes plainly, and some it escapes (a quote, non-ASCII)
TEXTS = st.sampled_from(["a", "b", "ab", "b,c]", "", 'q"', "é", "z\\"])
KEYS = {
    "k": st.integers(-5, 40),
    "k:desc": st.integers(-(2**62), 2**62),
    "t": st.sampled_from(["a", "b", "ab", "b,c]", "", "zz"]),
    "t:desc,k": st.tuples(st.sampled_from(["a", "b", "ab"]), st.integers(0, 9)),
}


def _key(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)


@st.composite
def _object(draw: st.DrawFn, spec: str, n: int) -> DataObject:
    keyless = draw(st.sampled_from([0, 0, 0, 4]))
    if draw(st.integers(0, 5)) == 0:  # no keyed rows (keyless ones or none at all)
        low = high = None
    else:
        a, b = _key(draw(KEYS[spec])), _key(draw(KEYS[spec]))
        pk = PoolKey.parse(spec)
        low, high = (a, b) if not pk.sort_key(b) < pk.sort_key(a) else (b, a)
    extra: dict[str, Any] = {}
    if draw(st.booleans()):
        extra = {"order": [f"2026-11-{draw(st.integers(10, 12))}", draw(TEXTS)]}
    return DataObject(
        id=f"o{n:03d}" + draw(st.sampled_from(["", "", "x"])),
        rows=draw(st.integers(0, 10**12)),
        size=100,
        min_key=low,
        max_key=high,
        keyless=keyless,
        schema_b64=draw(st.sampled_from(SCHEMAS)),
        key_types=tuple(draw(st.lists(st.sampled_from(["int64", "string"]), max_size=2))),
        created=f"2026-11-{draw(st.integers(10, 12))}" + draw(TEXTS),
        extra=extra,
        replaces=tuple(draw(st.lists(TEXTS, max_size=2))),
        partitions=tuple(draw(st.lists(st.sampled_from(["root", "p1"]), max_size=1))),
    )


def _ranges(objs: list[DataObject]) -> list[bytes]:
    """The stored bytes of a snapshot of ``objs``, in ranges of at most 4 entries (some
    decoded the usual way, others matched)."""
    snapshots = Snapshots(open_storage(f"memory://{uuid.uuid4().hex}"), "p")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(committed, "MAX_RANGE", 4)
        snapshot = snapshots.write({o.id: o.to_json() for o in objs})
    return [data for _, data in snapshots.range_texts(snapshot)]


def _whole(objs: list[DataObject], key: PoolKey) -> pa.Table:
    objects = sorted(objs, key=snapshot_cache.write_order)
    meta = {"key": str(key), "stored_objects": str(len(objects))}
    stored = {o.id: i for i, o in enumerate(objects)}
    return plan_table(Plan(objects, key), stored, [], meta)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_bulk_plan_is_the_whole_plan(data: st.DataObject) -> None:
    spec = data.draw(st.sampled_from(sorted(KEYS)))
    key = PoolKey.parse(spec)
    count = data.draw(st.integers(0, 40))
    objs = {o.id: o for o in (data.draw(_object(spec, i)) for i in range(count))}
    found = plan_bulk.entry_fields(_ranges(list(objs.values())), SKIP)
    assert found is not None
    fields, schemas = found
    meta = {"key": str(key), "stored_objects": str(len(objs))}
    got = plan_bulk.plan_table_bulk(fields, schemas, key, meta)
    assert got is not None  # integer and plain text keys, none inverted: always made
    want = _whole(list(objs.values()), key)
    assert got.equals(want, check_metadata=True)
    assert plan_ipc(got) == plan_ipc(want)


def test_escaped_ranges_decoded_and_other_keys_refused() -> None:
    """A range with an escaped text is decoded the usual way (same table); keys that are
    not integers or plain text, or past int64, are refused (planned the usual way)."""
    key = PoolKey.parse("k")
    plain = [DataObject(f"o{i}", 1, 1, (i,), (i + 1,), created="c") for i in range(5)]
    odd = DataObject("o9", 1, 1, (9,), (9,), created='"é"', extra={"order": ["x", "y"]})
    fields, schemas = plan_bulk.entry_fields(_ranges([*plain, odd]), SKIP) or (None, [])
    assert fields is not None and fields.column("entry").null_count == 4  # the first range's
    meta = {"key": "k", "stored_objects": "6"}
    got = plan_bulk.plan_table_bulk(fields, schemas, key, meta)
    assert got is not None and got.equals(_whole([*plain, odd], key), check_metadata=True)
    for low, high in [((1.5,), (2.5,)), ((2**63,), (2**63,)), (("é",), ("é",)), ((1,), ("a",))]:
        other = DataObject("o8", 1, 1, low, high, created="c")
        found = plan_bulk.entry_fields(_ranges([*plain, other]), SKIP)
        assert found is not None
        assert plan_bulk.plan_table_bulk(*found, key, {**meta, "stored_objects": "6"}) is None


def test_a_pool_first_reader_stores_the_bulk_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool no reader planned: its first reader stores the bulk table, which is the
    table planned whole; a pool with partitions, or float keys, is planned as before."""
    monkeypatch.setattr(snapshot_index, "MIN_OBJECTS", 3)
    for key, split, bulk in [("k", False, True), ("k", True, False), ("f", False, False)]:
        pool = Lake.init(f"memory://{uuid.uuid4().hex}").create_pool("p", key=key)
        for i in range(5):
            keys = list(range(i * 7, i * 7 + 12))
            pool.load([pa.table({"k": keys, "f": [k / 2 for k in keys]})])
        if split:
            pool.split(pool.status()["partitions"].column("id")[0].as_py(), at=20)
        forget_decoded(monkeypatch)
        snapshot = pool.versioned.commits.get(pool.resolve()).snapshot
        made = snapshot_index.bulk_table(pool.versioned, pool.key, snapshot)
        assert (made is not None) == bulk
        rows = pool.scan()  # the first reader: stores the plan
        path = snapshot_index.sidecar_path(pool.id, snapshot, "plan")
        stored = bytes(pool.storage.get(path)[32:])
        forget_decoded(monkeypatch)
        view = snapshot_cache.ScanView(pool.objects(), pool.key, pool.key_types)
        assert stored == plan_ipc(snapshot_index.whole_table(pool.key, view, pool.snapshot()[0]))
        want = sorted(k for i in range(5) for k in range(i * 7, i * 7 + 12))
        assert rows.column("k").to_pylist() == want  # (f orders rows as k does)


@pytest.mark.parametrize(
    "text",
    [b'{"entries": 5}', b'{"other": []}', b'{"entries": [["a"]]}', b"[" * 100_000, b"[1, 2]"],
)
def test_text_that_is_no_range_is_left_to_the_usual_path(text: bytes) -> None:
    """Stored text that is not a range document (a faulty writer's): no bulk table
    (the usual decoding then names the range), never an exception of its own."""
    assert plan_bulk.entry_fields([text], (PARTITION_PREFIX, INDEX_PREFIX)) is None
