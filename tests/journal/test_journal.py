"""Journals and journal stores: semantics, snapshots, threads and corruption.

Many processes appending at once, and writers killed mid-append: test_journal_processes.py.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bounded import join_all
from journal_support import entry_numbers, verify_faults
from limno.errors import (
    AlreadyExistsError,
    CorruptError,
    InvalidInputError,
    NotFoundError,
    PreconditionFailedError,
)
from limno.faults import Fault
from limno.journal import (
    AssertAbsent,
    AssertEquals,
    AssertPresent,
    Journal,
    JournalStore,
    Put,
    Remove,
    StoreState,
    Update,
)
from limno.lake import Lake
from limno.storage import ListResult, ObjectInfo, Storage, open_storage


class CountingStorage(Storage):
    """A store that delegates to another and records every ``get``."""

    def __init__(self, inner: Storage) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.gets: list[str] = []

    def get(self, path: str) -> bytes:
        self.gets.append(path)
        return self.inner.get(path)

    def get_range(self, path: str, start: int, end: int) -> bytes:
        self.gets.append(path)
        return self.inner.get_range(path, start, end)

    def head(self, path: str) -> ObjectInfo:
        return self.inner.head(path)

    def put(self, path: str, data: bytes) -> ObjectInfo:
        return self.inner.put(path, data)

    def put_if_absent(self, path: str, data: bytes) -> ObjectInfo:
        return self.inner.put_if_absent(path, data)

    def put_file(self, path: str, local_file: str) -> ObjectInfo:
        return self.inner.put_file(path, local_file)

    def list(self, prefix: str = "", delimiter: str | None = None) -> ListResult:
        return self.inner.list(prefix, delimiter)

    def delete(self, path: str) -> None:
        self.inner.delete(path)

    def copy(self, src: str, dst: str) -> None:
        self.inner.copy(src, dst)


@pytest.fixture
def journal(store: Storage) -> Journal:
    j = Journal(store, "j")
    j.create()
    return j


@pytest.fixture
def mem() -> Storage:
    return open_storage(f"memory://{uuid.uuid4().hex}")


def _fill(storage: Storage, prefix: str, count: int, every: int = 100) -> JournalStore:
    js = JournalStore(storage, prefix, snapshot_every=every)
    js.create()
    for i in range(count):
        js.commit([Put(f"k{i}", {"i": i})])
    return js


# -- Journal ---------------------------------------------------------------------


def test_journal_create_append_read(journal: Journal, store: Storage) -> None:
    assert journal.exists()
    assert journal.tail() == 1
    assert journal.head() == 0
    assert list(journal.entries()) == []
    assert store.get("j/TAIL").strip() == b"1"
    assert store.get("j/HEAD").strip() == b"0"
    assert [journal.append(b"body %d" % i) for i in range(5)] == [1, 2, 3, 4, 5]
    assert journal.head() == 5
    assert journal.read(3) == b"body 2"
    assert list(journal.entries()) == [(i + 1, b"body %d" % i) for i in range(5)]
    assert list(journal.entries(2, 3)) == [(2, b"body 1"), (3, b"body 2")]
    assert store.get("j/HEAD").strip() == b"5"
    assert entry_numbers(store, "j") == [1, 2, 3, 4, 5]
    # a second handle sees the same journal
    other = Journal(store, "j/")
    assert other.head() == 5
    assert other.read(5) == b"body 4"


def test_journal_create_twice_and_missing(journal: Journal, store: Storage) -> None:
    journal.append(b"x")
    with pytest.raises(AlreadyExistsError):
        Journal(store, "j").create()
    assert journal.read(1) == b"x"
    missing = Journal(store, "nothing")
    assert not missing.exists()
    with pytest.raises(NotFoundError, match="nothing"):
        missing.head()
    with pytest.raises(NotFoundError, match="j/7"):
        journal.read(7)


def test_try_append_is_exactly_once(journal: Journal) -> None:
    assert journal.try_append(1, b"first")
    assert not journal.try_append(1, b"second")
    assert journal.read(1) == b"first"
    assert journal.append(b"next") == 2


def test_tail_is_authority(mem: Storage) -> None:
    """TAIL says where the journal starts; older numbered objects are not part of it."""
    j = Journal(mem, "t")
    mem.put("t/TAIL", b"4\n")
    mem.put("t/2", b"stale leftovers")
    assert j.tail() == 4
    assert j.head() == 3  # empty: tail - 1
    assert j.append(b"a") == 4
    assert j.append(b"b") == 5
    assert list(j.entries()) == [(4, b"a"), (5, b"b")]
    assert list(j.entries(start=1)) == [(4, b"a"), (5, b"b")]
    assert list(j.verify()) == []


def test_head_hint_lag_is_probed(mem: Storage) -> None:
    j = Journal(mem, "j")
    j.create()
    for i in range(37):
        j.append(b"%d" % i)
    # a stale hint (some writer died before updating it)
    mem.put("j/HEAD", b"3\n")
    assert Journal(mem, "j").head() == 37
    assert mem.get("j/HEAD").strip() == b"37"
    # no hint at all
    mem.delete("j/HEAD")
    assert Journal(mem, "j").head() == 37
    assert mem.get("j/HEAD").strip() == b"37"
    # an unreadable hint
    mem.put("j/HEAD", b"garbage")
    assert Journal(mem, "j").head() == 37
    assert mem.get("j/HEAD").strip() == b"37"
    # a hint past the end (never trusted)
    mem.put("j/HEAD", b"90\n")
    assert [f.path for f in Journal(mem, "j").verify()] == ["j/HEAD"]
    assert Journal(mem, "j").head() == 37
    assert mem.get("j/HEAD").strip() == b"37"
    assert list(Journal(mem, "j").verify()) == []


def test_head_probes_are_logarithmic(mem: Storage) -> None:
    j = Journal(mem, "j")
    j.create()
    for i in range(300):
        j.append(b"%d" % i)
    mem.put("j/HEAD", b"0\n")
    probes: list[str] = []

    class Probing(CountingStorage):
        def head(self, path: str) -> ObjectInfo:
            probes.append(path)
            return super().head(path)

    assert Journal(Probing(mem), "j").head() == 300
    assert len(probes) < 25, probes


def test_head_seen_before_costs_one_probe(mem: Storage) -> None:
    """A handle that saw the head asks only whether the next entry exists; another
    writer's entries are still found."""
    writer = Journal(mem, "j")
    writer.create()
    for i in range(5):
        writer.append(b"%d" % i)
    probes: list[str] = []

    class Probing(CountingStorage):
        def head(self, path: str) -> ObjectInfo:
            probes.append(path)
            return super().head(path)

    counting = Probing(mem)
    reader = Journal(counting, "j")
    assert reader.head() == 5
    probes.clear()
    counting.gets.clear()
    assert reader.head() == 5
    assert probes == ["j/6"] and counting.gets == []
    writer.append(b"x")
    writer.append(b"y")
    assert reader.head() == 7
    assert reader.append(b"z") == 8
    assert writer.head() == 8


def test_journal_threads_append_contiguously(mem: Storage) -> None:
    j = Journal(mem, "j")
    j.create()
    results: list[int] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        mine = Journal(mem, "j")
        for i in range(25):
            n = mine.append(b"w%d-%d" % (w, i))
            with lock:
                results.append(n)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    join_all(threads)
    assert sorted(results) == list(range(1, 151))
    bodies = [body for _, body in j.entries()]
    assert sorted(bodies) == sorted(b"w%d-%d" % (w, i) for w in range(6) for i in range(25))


# -- JournalStore ------------------------------------------------------------------


def test_store_put_remove_history(store: Storage) -> None:
    js = JournalStore(store, "s")
    js.create()
    assert js.exists()
    assert js.state() == StoreState(0, {})
    s1 = js.commit([Put("a", {"v": 1}), Put("b", {"v": 2})], meta={"who": "me"})
    assert s1.n == 1 and dict(s1.items) == {"a": {"v": 1}, "b": {"v": 2}}
    s2 = js.commit([Remove("a"), Put("b", {"v": 3})])
    assert s2.n == 2 and dict(s2.items) == {"b": {"v": 3}}
    assert js.get("b") == {"v": 3}
    assert js.get("a") is None
    fresh = JournalStore(store, "s")
    assert fresh.state().n == 2
    assert dict(fresh.state().items) == {"b": {"v": 3}}
    history = list(fresh.history())
    assert [n for n, _ in history] == [1, 2]
    assert history[0][1]["meta"] == {"who": "me"}
    assert history[1][1]["updates"] == [
        {"op": "remove", "key": "a"},
        {"op": "put", "key": "b", "value": {"v": 3}},
    ]
    assert all(isinstance(entry["ts"], str) for _, entry in history)
    assert verify_faults(fresh) == []


def test_store_requirements(mem: Storage) -> None:
    js = JournalStore(mem, "s")
    js.create()
    js.commit([Put("a", {"v": 1})], [AssertEquals("a", None), AssertAbsent("a")])
    with pytest.raises(PreconditionFailedError):
        js.commit([Put("a", {"v": 2})], [AssertEquals("a", {"v": 99})])
    with pytest.raises(PreconditionFailedError):
        js.commit([Put("a", {"v": 2})], [AssertEquals("a", None)])
    with pytest.raises(PreconditionFailedError):
        js.commit([Put("a", {"v": 2})], [AssertAbsent("a")])
    with pytest.raises(NotFoundError):
        js.commit([Put("b", {"v": 2})], [AssertPresent("b")])
    with pytest.raises(NotFoundError):
        js.commit([Remove("missing")])
    assert js.journal.head() == 1  # nothing failed was written
    js.commit([Put("a", {"v": 2})], [AssertEquals("a", {"v": 1}), AssertPresent("a")])
    assert js.get("a") == {"v": 2}


def test_store_cas_sees_concurrent_change(mem: Storage) -> None:
    """A stale handle re-reads before checking: its compare-and-swap fails."""
    one = JournalStore(mem, "s")
    one.create()
    one.commit([Put("ref", {"at": 1})])
    two = JournalStore(mem, "s")
    assert two.get("ref") == {"at": 1}
    one.commit([Put("ref", {"at": 2})])
    with pytest.raises(PreconditionFailedError):
        two.commit([Put("ref", {"at": 3})], [AssertEquals("ref", {"at": 1})])
    assert two.commit([Put("ref", {"at": 3})], [AssertEquals("ref", {"at": 2})]).n == 3


def test_store_commit_from_a_stale_state_checks_again(mem: Storage) -> None:
    """A commit started from a state the caller read loses the race when that state is
    stale, and its requirements are checked again on the fresh one."""
    one = JournalStore(mem, "s")
    one.create()
    two = JournalStore(mem, "s")
    stale = two.state()
    one.commit([Put("x", {"v": 1})])
    with pytest.raises(PreconditionFailedError):
        two.commit([Put("x", {"v": 2})], [AssertAbsent("x")], state=stale)
    landed = two.commit([Put("y", {"v": 3})], [AssertAbsent("y")], state=stale)
    assert landed.n == 2
    assert dict(landed.items) == {"x": {"v": 1}, "y": {"v": 3}}
    assert dict(JournalStore(mem, "s").state().items) == dict(landed.items)


def test_store_callable_updates(mem: Storage) -> None:
    js = JournalStore(mem, "s")
    js.create()
    js.commit([Put("counter", {"n": 0})])

    def increment(state: StoreState) -> list[Update]:
        return [Put("counter", {"n": state.items["counter"]["n"] + 1})]

    def refuse(state: StoreState) -> list[Update]:
        raise InvalidInputError("refused")

    errors: list[BaseException] = []

    def worker() -> None:
        try:
            mine = JournalStore(mem, "s")
            for _ in range(20):
                mine.commit(increment)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(5)]
    for t in threads:
        t.start()
    join_all(threads)
    assert not errors, errors
    assert js.get("counter") == {"n": 100}  # no increment lost to a race
    assert js.journal.head() == 101
    with pytest.raises(InvalidInputError, match="refused"):
        js.commit(refuse)
    assert js.journal.head() == 101


def test_state_at_time_travel(mem: Storage) -> None:
    js = JournalStore(mem, "s", snapshot_every=4)
    js.create()
    expected: list[dict[str, dict[str, int]]] = [{}]
    items: dict[str, dict[str, int]] = {}
    for i in range(13):
        if i % 3 == 2:
            removed = sorted(items)[0]
            js.commit([Remove(removed)])
            del items[removed]
        else:
            js.commit([Put(f"k{i}", {"i": i})])
            items[f"k{i}"] = {"i": i}
        expected.append(dict(items))
    fresh = JournalStore(mem, "s", snapshot_every=4)
    for n in [13, 0, 5, 8, 12, 1, 4, 13, 7]:
        state = fresh.state(at=n)
        assert state.n == n
        assert dict(state.items) == expected[n], n
    assert dict(fresh.state().items) == expected[13]
    assert dict(js.state(at=3).items) == expected[3]
    with pytest.raises(NotFoundError):
        fresh.state(at=20)


def test_snapshot_makes_open_constant(store: Storage) -> None:
    _fill(store, "s", 35, every=10)
    assert JournalStore(store, "s").journal.snapshot_numbers() == [10, 20, 30]
    replayed: dict[str, object] = {}  # the full replay, by hand
    for _, entry in JournalStore(store, "s").history():
        for u in entry["updates"]:
            replayed[u["key"]] = u["value"]
    counting = CountingStorage(store)
    opened = JournalStore(counting, "s", snapshot_every=10).state()
    entry_reads = [p for p in counting.gets if p.split("/")[-1].isdigit() and "/snap/" not in p]
    assert "s/snap/30" in counting.gets
    assert sorted(entry_reads) == [f"s/{n}" for n in range(31, 36)]
    assert len(counting.gets) < 10, counting.gets
    assert opened.n == 35
    assert dict(opened.items) == replayed == {f"k{i}": {"i": i} for i in range(35)}


def test_corrupt_snapshot_ignored_but_reported(mem: Storage) -> None:
    _fill(mem, "s", 35, every=10)
    assert verify_faults(JournalStore(mem, "s", snapshot_every=10)) == []
    mem.put("s/snap/30", mem.get("s/snap/30")[:-5])
    state = JournalStore(mem, "s", snapshot_every=10).state()
    assert dict(state.items) == {f"k{i}": {"i": i} for i in range(35)}
    assert [f.path for f in verify_faults(JournalStore(mem, "s", snapshot_every=10))] == [
        "s/snap/30"
    ]


def test_snapshot_that_disagrees_is_reported(mem: Storage) -> None:
    js = _fill(mem, "s", 20, every=10)
    js.journal.put_snapshot(20, json.dumps({"items": {"bogus": {}}, "ts": None}).encode())
    faults = verify_faults(JournalStore(mem, "s"))
    assert [f.path for f in faults] == ["s/snap/20"]
    assert "disagrees" in faults[0].problem


# -- corruption ------------------------------------------------------------------


def _truncate(data: bytes) -> bytes:
    return data[: len(data) - 7]


def _flip(data: bytes) -> bytes:
    return data[:-3] + bytes([data[-3] ^ 0x40]) + data[-2:]


CORRUPTIONS = {
    "truncated": _truncate,
    "flipped": _flip,
    "garbage": lambda data: b"\x00\xffnot a frame at all" * 3,
    "empty": lambda data: b"",
    "header-only": lambda data: data.split(b"\n", 1)[0],
}


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_corrupt_entry(store: Storage, how: str) -> None:
    js = _fill(store, "s", 4)
    path = js.journal.entry_path(2)
    store.put(path, CORRUPTIONS[how](store.get(path)))
    with pytest.raises(CorruptError, match="s/2"):
        js.journal.read(2)
    with pytest.raises(CorruptError, match="s/2"):
        JournalStore(store, "s").state()
    faults = list(Journal(store, "s").verify())
    assert [f.path for f in faults] == ["s/2"]
    assert [f.path for f in verify_faults(JournalStore(store, "s"))] == ["s/2"]


def test_misplaced_entry(mem: Storage) -> None:
    js = _fill(mem, "s", 3)
    mem.copy("s/1", "s/2")
    with pytest.raises(CorruptError, match="s/2"):
        js.journal.read(2)
    assert [f.path for f in js.journal.verify()] == ["s/2"]


def test_entry_that_is_not_json(mem: Storage) -> None:
    js = _fill(mem, "s", 2)
    js.journal.try_append(3, b"{not json")
    with pytest.raises(CorruptError, match="s/3"):
        JournalStore(mem, "s").state()
    assert [f.path for f in verify_faults(JournalStore(mem, "s"))] == ["s/3"]


def test_gap_is_reported(mem: Storage) -> None:
    js = _fill(mem, "s", 6)
    mem.delete("s/3")
    faults = list(js.journal.verify())
    assert [f.path for f in faults] == ["s/3"]
    assert "missing" in faults[0].problem
    with pytest.raises(NotFoundError, match="s/3"):
        JournalStore(mem, "s").state()


def test_stray_object_is_reported(mem: Storage) -> None:
    js = _fill(mem, "s", 2)
    mem.put("s/junk", b"?")
    assert [f.path for f in js.journal.verify()] == ["s/junk"]


def test_lake_verify_reports_journal_faults(tmp_path: Path) -> None:
    where = str(tmp_path / "lake")
    Lake.init(where)
    storage = open_storage(where)
    pools = JournalStore(storage, "pools")
    for i in range(3):
        pools.commit([Put(f"p{i}", {"i": i})])
    path = pools.journal.entry_path(2)
    assert path == "pools/2"
    storage.put(path, _flip(storage.get(path)))
    faults = list(Lake.open(where).verify())
    assert "pools/2" in [f.path for f in faults]
    storage.delete(path)
    faults = list(Lake.open(where).verify())
    assert "pools/2" in [f.path for f in faults]
    assert any("missing" in f.problem for f in faults if f.path == "pools/2")


def _iter_paths(faults: Iterator[Fault]) -> list[str]:
    return [f.path for f in faults]


def test_verify_clean_on_every_backend(store: Storage) -> None:
    js = _fill(store, "s", 25, every=10)
    assert _iter_paths(js.verify()) == []
    assert _iter_paths(js.journal.verify()) == []
