"""Fuzz the decoders of stored metadata: damaged bytes are a CorruptError, never a crash.

Every object limno reads back from a lake (journal frames, journal store entries and
snapshots, commits, snapshot ranges and metaranges, data object entries, lake.json)
may have been truncated, overwritten or written by something else. For each decoder
the property is the same: arbitrary bytes, arbitrary JSON and mutations of a valid
document either decode to a well-typed value or raise :class:`CorruptError` naming
where the bytes are stored; no KeyError, TypeError, ValueError or UnicodeDecodeError.
A failing example is printed with a ``@reproduce_failure`` blob.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.core.commits import ACTION_OPS, Action, Commit, CommitStore
from limno.core.committed import RangeRef, Snapshots
from limno.data.objects import DataObject, schema_to_b64
from limno.errors import CorruptError
from limno.journal import JournalStore, Put
from limno.journal._journal import Journal, decode_frame, encode_frame
from limno.lake import LAKE_JSON, check_lake_json
from limno.storage import Storage, open_storage

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=16,
)


def _spots(doc: Any) -> list[tuple[Any, Any]]:
    """(container, key or index) of every value inside ``doc``."""
    out: list[tuple[Any, Any]] = []
    todo = [doc]
    while todo:
        node = todo.pop()
        keys = list(node) if isinstance(node, dict) else range(len(node))
        for k in keys:
            out.append((node, k))
            if isinstance(node[k], dict | list):
                todo.append(node[k])
    return out


@st.composite
def mutated(draw: st.DrawFn, valid: Any) -> Any:
    """``valid`` (a JSON document) with a few values replaced by arbitrary JSON or removed."""
    doc = copy.deepcopy(valid)
    for _ in range(draw(st.integers(1, 3))):
        spots = _spots(doc)
        if not spots:
            break
        node, key = draw(st.sampled_from(spots))
        if isinstance(node, dict) and draw(st.booleans()):
            del node[key]
        else:
            node[key] = draw(json_values)
    return doc


def documents(valid: Any) -> st.SearchStrategy[bytes]:
    """Bytes to decode: arbitrary, arbitrary JSON, mutations of ``valid`` and its bytes,
    and JSON nested past Python's recursion limit."""
    text = json.dumps(valid).encode()
    return st.one_of(
        st.binary(max_size=300),
        json_values.map(lambda v: json.dumps(v).encode()),
        mutated(valid).map(lambda v: json.dumps(v).encode()),
        damaged(text),
        st.integers(1, 100_000).map(lambda n: b"[" * n + b"]" * n),
    )


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with bits flipped, cut short, or a stretch replaced."""
    out = bytearray(data)
    kind = draw(st.sampled_from(["flip", "cut", "splice"]))
    if kind == "flip" and out:
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(out) - 1))
            out[i] ^= 1 << draw(st.integers(0, 7))
    elif kind == "cut":
        out = out[: draw(st.integers(0, len(out)))]
    else:
        i = draw(st.integers(0, len(out)))
        j = draw(st.integers(i, min(len(out), i + 16)))
        out[i:j] = draw(st.binary(max_size=16))
    return bytes(out)


def corrupt_naming(path: str, decode: Callable[[], Any]) -> Any:
    """``decode()``'s value, or None when it raised a CorruptError that names ``path``."""
    try:
        return decode()
    except CorruptError as e:
        assert path in str(e), str(e)
        return None


@pytest.fixture(scope="module")
def store() -> Storage:
    return open_storage(f"memory://fuzz-{uuid.uuid4().hex}")


def unique() -> str:
    return uuid.uuid4().hex


# -- journal frames ------------------------------------------------------------------------
@SETTINGS
@given(st.binary(max_size=200), st.integers(0, 10**6), st.data())
def test_journal_frames(body: bytes, n: int, data: st.DataObject) -> None:
    frame = encode_frame(n, body)
    assert decode_frame("j/1", n, frame) == body
    raw = data.draw(st.one_of(st.binary(max_size=300), damaged(frame)))
    decoded = corrupt_naming("j/1", lambda: decode_frame("j/1", n, raw))
    assert decoded is None or decoded == body  # the checksum passed: the very bytes


@SETTINGS
@given(st.binary(max_size=40) | st.integers(0, 10**5).map(lambda n: b"7" * n))
def test_journal_tail_numbers(store: Storage, raw: bytes) -> None:
    prefix = unique()
    store.put(f"{prefix}/TAIL", raw)
    journal = Journal(store, prefix)
    tail = corrupt_naming(f"{prefix}/TAIL", journal.tail)
    assert tail is None or type(tail) is int
    faults = list(Journal(store, prefix).verify())
    assert (tail is None) == any(f.path == f"{prefix}/TAIL" for f in faults), faults


# -- journal store entries and snapshots ---------------------------------------------------
VALID_ENTRY = {
    "ts": "2026-01-01T00:00:00+00:00",
    "updates": [{"op": "put", "key": "b", "value": {"x": [1]}}],
}


def check_state(items: Mapping[str, Any]) -> None:
    assert all(isinstance(k, str) and isinstance(v, dict) for k, v in items.items())


@SETTINGS
@given(documents(VALID_ENTRY))
def test_journal_store_entries(store: Storage, body: bytes) -> None:
    prefix = unique()
    writer = JournalStore(store, prefix)
    writer.create()
    writer.commit([Put("a", {"v": 1})])
    path = writer.journal.entry_path(2)
    store.put(path, encode_frame(2, body))
    reader = JournalStore(store, prefix)
    state = corrupt_naming(path, reader.state)
    if state is not None:
        check_state(state.items)
        assert state.ts is None or isinstance(state.ts, str)
    history = corrupt_naming(path, lambda: list(reader.history()))
    assert (history is None) == (state is None)
    faults = list(reader.verify())
    assert (faults == []) == (state is not None), faults


@SETTINGS
@given(documents({"items": {"a": {"v": 1}, "b": {"v": 2}}, "ts": "2026-01-01T00:00:00"}))
def test_journal_store_snapshots(store: Storage, body: bytes) -> None:
    prefix = unique()
    writer = JournalStore(store, prefix, snapshot_every=2)
    writer.create()
    writer.commit([Put("a", {"v": 1})])
    writer.commit([Put("b", {"v": 2})])  # writes the snapshot at entry 2
    store.put(writer.journal.snapshot_path(2), encode_frame(2, body))
    reader = JournalStore(store, prefix, snapshot_every=2)
    state = reader.state()  # a snapshot is a cache: a bad one is passed over
    check_state(state.items)
    for fault in reader.verify():
        assert fault.path == writer.journal.snapshot_path(2)


# -- commits -------------------------------------------------------------------------------
def valid_commit(cid: str) -> dict[str, Any]:
    action = Action("add", "obj1", {"id": "obj1", "rows": 3})
    snapshot = hashlib.sha256(b"x").hexdigest()
    commit = Commit(cid, ("parent1",), snapshot, "ann", "2026-01-01T00:00:00+00:00", "m")
    return {**commit.to_json(), "meta": {"k": "v"}, "actions": [action.to_json()]}


def check_commit(c: Commit, cid: str) -> None:
    assert c.id == cid and isinstance(c.snapshot, str) and len(c.snapshot) == 64
    assert all(isinstance(p, str) for p in c.parents)
    assert all(isinstance(x, str) for x in (c.author, c.date, c.message))
    assert isinstance(c.meta, dict) and type(c.retries) is int
    if c.date:
        assert isinstance(c.time, dt.datetime)
    for a in c.actions:
        assert a.op in ACTION_OPS and isinstance(a.key, str) and isinstance(a.value, Mapping)


@SETTINGS
@given(st.data())
def test_commits(store: Storage, data: st.DataObject) -> None:
    cid, pool = unique(), unique()
    raw = data.draw(documents(valid_commit(cid)))
    commits = CommitStore(store, pool)
    store.put(commits.path(cid), raw)
    commit = corrupt_naming(commits.path(cid), lambda: commits.get(cid))
    if commit is not None:
        check_commit(commit, cid)


def test_a_valid_commit_decodes(store: Storage) -> None:
    cid, pool = unique(), unique()
    commits = CommitStore(store, pool)
    store.put(commits.path(cid), json.dumps(valid_commit(cid)).encode())
    assert commits.get(cid).to_json() == valid_commit(cid)


# -- snapshot ranges and metaranges --------------------------------------------------------
def stored(store: Storage, pool: str, kind: str, raw: bytes) -> tuple[str, str]:
    """Store ``raw`` where a snapshot object with its hash lives: (id, path)."""
    oid = hashlib.sha256(raw).hexdigest()
    path = f"{pool}/meta/{kind}/{oid}"
    store.put(path, raw)
    return oid, path


VALID_META = {"ranges": [{"id": "a" * 64, "first": "k1", "last": "k9", "count": 2}]}
VALID_RANGE = {"entries": [["k1", {"id": "k1"}], ["k9", {"id": "k9", "rows": 1}]]}


@SETTINGS
@given(documents(VALID_META), documents(VALID_RANGE))
def test_snapshot_objects(store: Storage, meta: bytes, entries: bytes) -> None:
    pool = unique()
    snapshots = Snapshots(store, pool)
    mid, path = stored(store, pool, "metaranges", meta)
    refs = corrupt_naming(path, lambda: snapshots.ranges(mid))
    for ref in refs or []:
        assert isinstance(ref, RangeRef) and type(ref.count) is int
        assert all(isinstance(x, str) for x in (ref.id, ref.first, ref.last))
    rid, path = stored(store, pool, "ranges", entries)
    rows = corrupt_naming(path, lambda: snapshots.range_entries(rid))
    for key, value in rows or []:
        assert isinstance(key, str) and isinstance(value, dict)


# -- data object entries -------------------------------------------------------------------
VALID_OBJECT = DataObject(
    id="3MVdzvPhrEHx5aDAhc7Ou5TpFTh",
    rows=3,
    size=1234,
    min_key=(1, "a"),
    max_key=(dt.date(2026, 1, 2), b"\x00"),
    keyless=1,
    schema_b64=schema_to_b64(pa.schema([("k", pa.int64())])),
    key_types=("int64", "string"),
    created="2026-01-01T00:00:00+00:00",
    extra={"order": [1]},
    replaces=("old",),
    partitions=("p1",),
).to_json()


@SETTINGS
@given(st.one_of(json_values, mutated(VALID_OBJECT)))
def test_data_object_entries(doc: Any) -> None:
    obj = corrupt_naming(
        "pool/meta/ranges/x", lambda: DataObject.from_json(doc, "pool/meta/ranges/x")
    )
    if obj is None:
        return
    assert isinstance(obj.id, str) and all(
        type(n) is int for n in (obj.rows, obj.size, obj.keyless)
    )
    assert all(isinstance(t, str) for t in (*obj.key_types, *obj.replaces, *obj.partitions))
    for key in (obj.min_key, obj.max_key):
        assert key is None or isinstance(key, tuple)
    schema = corrupt_naming(obj.id, lambda: obj.schema)
    assert schema is None or isinstance(schema, pa.Schema)


def test_a_valid_data_object_entry_decodes() -> None:
    assert DataObject.from_json(VALID_OBJECT).to_json() == VALID_OBJECT


# -- lake.json -----------------------------------------------------------------------------
@SETTINGS
@given(documents({"format": "limno", "version": 1, "created": "2026-01-01T00:00:00+00:00"}))
def test_lake_descriptor(raw: bytes) -> None:
    doc = corrupt_naming(f"file:///l/{LAKE_JSON}", lambda: check_lake_json("file:///l", raw))
    assert doc is None or (doc["format"] == "limno" and doc["version"] == 1)
