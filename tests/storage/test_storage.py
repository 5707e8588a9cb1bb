"""Storage conformance: every backend (local, memory, S3 on loopback) behaves the same.

The ``store`` fixture runs each test on a fresh local directory, a fresh memory
store and a fresh bucket on the loopback S3 server.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path

import pytest

from _workers import RACE_KEYS, race_payload
from bounded import DEFAULT_TIMEOUT, join_all, read_line, stop, whole_lines
from limno.errors import (
    AlreadyExistsError,
    InvalidInputError,
    LimnoError,
    NotFoundError,
)
from limno.storage import ObjectInfo, Storage, open_storage

WORKERS = str(Path(__file__).parents[1] / "_workers.py")
INVALID_PATHS = ["../x", "a/../x", "/abs", "a//b", "", "a/", "./a"]


def _populate(store: Storage) -> None:
    for path in ["c", "a/2", "a/1", "a/b/3", "ab/4", "a/b/c/5"]:
        store.put(path, path.encode())


# -- get / put / head -----------------------------------------------------------


def test_put_get_roundtrip(store: Storage) -> None:
    info = store.put("dir/obj.bin", b"hello world")
    assert isinstance(info, ObjectInfo)
    assert info.path == "dir/obj.bin"
    assert info.size == 11
    assert store.get("dir/obj.bin") == b"hello world"


def test_empty_object(store: Storage) -> None:
    store.put("empty", b"")
    assert store.get("empty") == b""
    assert store.head("empty").size == 0
    assert store.exists("empty")


def test_get_missing_is_not_found(store: Storage) -> None:
    with pytest.raises(NotFoundError, match="nope/x"):
        store.get("nope/x")
    with pytest.raises(NotFoundError):
        store.head("nope/x")
    with pytest.raises(NotFoundError):
        store.get_range("nope/x", 0, 10)


def test_get_range(store: Storage) -> None:
    data = bytes(range(256)) * 4
    store.put("r", data)
    assert store.get_range("r", 10, 20) == data[10:20]
    assert store.get_range("r", 0, 1) == data[:1]
    assert store.get_range("r", 1000, 5000) == data[1000:]
    assert store.get_range("r", 0, len(data)) == data
    assert store.get_range("r", 7, 7) == b""
    assert store.get_range("r", len(data), len(data) + 10) == b""
    assert store.get_range("r", 5000, 6000) == b""
    with pytest.raises(InvalidInputError):
        store.get_range("r", 20, 10)
    with pytest.raises(InvalidInputError):
        store.get_range("r", -1, 10)


def test_head(store: Storage) -> None:
    before = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    store.put("h/obj", b"x" * 1234)
    info = store.head("h/obj")
    assert info.path == "h/obj"
    assert info.size == 1234
    assert info.etag is None or (isinstance(info.etag, str) and info.etag)
    assert info.last_modified.tzinfo is not None
    assert info.last_modified > before


def test_put_overwrites(store: Storage) -> None:
    store.put("o", b"first version, long")
    store.put("o", b"second")
    assert store.get("o") == b"second"
    assert store.head("o").size == 6


def test_put_if_absent(store: Storage) -> None:
    info = store.put_if_absent("once", b"first")
    assert info.size == 5
    with pytest.raises(AlreadyExistsError, match="once"):
        store.put_if_absent("once", b"second")
    assert store.get("once") == b"first"
    # a plain put still replaces it
    store.put("once", b"third")
    assert store.get("once") == b"third"
    with pytest.raises(AlreadyExistsError):
        store.put_if_absent("once", b"fourth")
    assert store.get("once") == b"third"


def test_put_if_absent_after_delete(store: Storage) -> None:
    store.put_if_absent("k", b"1")
    store.delete("k")
    store.put_if_absent("k", b"2")
    assert store.get("k") == b"2"


def test_errors_are_limno_errors(store: Storage) -> None:
    store.put("x", b"1")
    with pytest.raises(LimnoError):
        store.put_if_absent("x", b"2")
    with pytest.raises(LimnoError):
        store.get("y")


# -- listing --------------------------------------------------------------------


def test_list_prefix_recursive_sorted(store: Storage) -> None:
    _populate(store)
    paths = [o.path for o in store.list("a").objects]
    assert paths == ["a/1", "a/2", "a/b/3", "a/b/c/5"]
    assert [o.path for o in store.list("a/").objects] == paths
    assert store.list("a").prefixes == []
    everything = [o.path for o in store.list().objects]
    assert everything == ["a/1", "a/2", "a/b/3", "a/b/c/5", "ab/4", "c"]
    sizes = {o.path: o.size for o in store.list().objects}
    assert sizes == {p: len(p) for p in everything}
    assert [o.path for o in store.walk("a/b")] == ["a/b/3", "a/b/c/5"]


def test_list_missing_prefix_is_empty(store: Storage) -> None:
    _populate(store)
    assert store.list("zzz").objects == []
    assert store.list("zzz", delimiter="/").objects == []
    assert store.list("zzz", delimiter="/").prefixes == []


def test_list_empty_store(store: Storage) -> None:
    assert store.list().objects == []
    listing = store.list(delimiter="/")
    assert listing.objects == [] and listing.prefixes == []


def test_list_with_delimiter(store: Storage) -> None:
    _populate(store)
    top = store.list("", delimiter="/")
    assert [o.path for o in top.objects] == ["c"]
    assert top.prefixes == ["a/", "ab/"]
    level = store.list("a", delimiter="/")
    assert [o.path for o in level.objects] == ["a/1", "a/2"]
    assert level.prefixes == ["a/b/"]
    deeper = store.list("a/b/", delimiter="/")
    assert [o.path for o in deeper.objects] == ["a/b/3"]
    assert deeper.prefixes == ["a/b/c/"]
    assert all(p.endswith("/") for p in top.prefixes + level.prefixes + deeper.prefixes)


def test_list_other_delimiter_is_invalid(store: Storage) -> None:
    with pytest.raises(InvalidInputError):
        store.list("", delimiter=",")


def test_list_many_sorted(store: Storage) -> None:
    names = [f"m/{i}" for i in range(30)]
    for name in reversed(names):
        store.put(name, b"")
    assert [o.path for o in store.list("m").objects] == sorted(names)


# -- delete / copy / exists -----------------------------------------------------


def test_delete(store: Storage) -> None:
    store.put("d/x", b"1")
    store.put("d/y", b"2")
    store.delete("d/x")
    assert not store.exists("d/x")
    with pytest.raises(NotFoundError):
        store.get("d/x")
    assert [o.path for o in store.list("d").objects] == ["d/y"]
    store.delete("d/x")  # missing: not an error
    store.delete("never/was")


def test_copy(store: Storage) -> None:
    store.put("src", b"payload")
    store.copy("src", "dst/copy")
    assert store.get("dst/copy") == b"payload"
    assert store.get("src") == b"payload"
    store.put("other", b"replacement")
    store.copy("other", "dst/copy")
    assert store.get("dst/copy") == b"replacement"


def test_copy_missing_source(store: Storage) -> None:
    with pytest.raises(NotFoundError):
        store.copy("missing", "dst")
    assert not store.exists("dst")


def test_exists(store: Storage) -> None:
    assert not store.exists("e")
    store.put("e/f", b"")
    assert store.exists("e/f")
    assert not store.exists("e")  # a prefix is not an object


@pytest.mark.parametrize("bad", INVALID_PATHS)
def test_invalid_paths(store: Storage, bad: str) -> None:
    store.put("good", b"1")
    calls = [
        lambda: store.get(bad),
        lambda: store.get_range(bad, 0, 1),
        lambda: store.head(bad),
        lambda: store.put(bad, b"x"),
        lambda: store.put_if_absent(bad, b"x"),
        lambda: store.delete(bad),
        lambda: store.copy("good", bad),
        lambda: store.copy(bad, "good2"),
        lambda: store.exists(bad),
    ]
    for call in calls:
        with pytest.raises(InvalidInputError):
            call()
    assert [o.path for o in store.list().objects] == ["good"]


# -- big objects and files ------------------------------------------------------


def test_binary_6mb_roundtrip(store: Storage) -> None:
    data = os.urandom(6 * 1024 * 1024 + 123)
    info = store.put("big/blob", data)
    assert info.size == len(data)
    assert store.get("big/blob") == data
    assert store.get_range("big/blob", 5_000_000, 5_000_100) == data[5_000_000:5_000_100]
    assert store.get_range("big/blob", len(data) - 10, len(data) + 10) == data[-10:]


@pytest.mark.parametrize("size", [0, 1000, 6 * 1024 * 1024 + 7])
def test_put_file(store: Storage, tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    local = tmp_path / "upload.bin"
    local.write_bytes(data)
    info = store.put_file("files/upload.bin", str(local))
    assert info.size == size
    assert store.head("files/upload.bin").size == size
    assert store.get("files/upload.bin") == data
    # replacing works too
    local.write_bytes(b"small")
    store.put_file("files/upload.bin", str(local))
    assert store.get("files/upload.bin") == b"small"


# -- opening --------------------------------------------------------------------


def test_local_store(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(NotFoundError):
        open_storage(str(missing))
    store = open_storage(str(missing), create=True)
    assert missing.is_dir()
    assert store.uri == missing.as_uri()
    store.put("a/b.txt", b"on disk")
    local = store.local_path("a/b.txt")
    assert local is not None
    assert Path(local).read_bytes() == b"on disk"
    via_file_uri = open_storage(missing.as_uri())
    assert via_file_uri.get("a/b.txt") == b"on disk"


def test_local_store_answers_as_obstore_does(tmp_path: Path) -> None:
    """A local store reads and writes small objects itself (no hand-off to obstore's
    threads): what it reports is what obstore reports, and it leaves no staging file."""
    import obstore

    from limno.storage._obstore import ObStorage, _info

    store = open_storage(str(tmp_path / "lake"), create=True)
    assert isinstance(store, ObStorage)
    store.put("a/new", b"one")  # a new file (and its directory)
    store.put("a/new", b"three")  # replaced
    store.put_if_absent("b/c/once", b"1")
    with pytest.raises(AlreadyExistsError, match="b/c/once"):
        store.put_if_absent("b/c/once", b"2")
    for path, data in [("a/new", b"three"), ("b/c/once", b"1")]:
        assert store.get(path) == data
        assert store.head(path) == _info(obstore.head(store._store, path))
    assert store.exists("a/new") and not store.exists("a/missing") and not store.exists("a")
    with pytest.raises(NotFoundError, match="a/new/below"):
        store.head("a/new/below")  # a file where a directory would be
    store.delete("a/new")
    store.delete("a/new")  # deleting a missing object is no error
    assert not store.exists("a/new")
    assert store.list_partial() == []
    assert [o.path for o in store.list().objects] == ["b/c/once"]


def test_memory_store_by_name() -> None:
    name = uuid.uuid4().hex
    first = open_storage(f"memory://{name}")
    first.put("x", b"shared")
    assert open_storage(f"memory://{name}").get("x") == b"shared"
    assert first.local_path("x") is None
    other = open_storage(f"memory://{uuid.uuid4().hex}")
    assert not other.exists("x")


@pytest.mark.parametrize("uri", ["", "ftp://host/x", "s3://", "s3:///path"])
def test_open_invalid(uri: str) -> None:
    with pytest.raises(InvalidInputError):
        open_storage(uri)


@pytest.mark.s3
def test_s3_prefix_isolates(s3_endpoint: str) -> None:
    from s3_support import make_bucket

    bucket = make_bucket(s3_endpoint)
    one = open_storage(f"s3://{bucket}/one")
    two = open_storage(f"s3://{bucket}/two")
    whole = open_storage(f"s3://{bucket}")
    assert one.uri == f"s3://{bucket}/one"
    one.put("k", b"1")
    two.put("k", b"2")
    assert one.get("k") == b"1"
    assert two.get("k") == b"2"
    assert [o.path for o in one.list().objects] == ["k"]
    assert [o.path for o in whole.list().objects] == ["one/k", "two/k"]
    assert whole.list(delimiter="/").prefixes == ["one/", "two/"]


# -- concurrency ----------------------------------------------------------------


def _race_threads(store: Storage, tags: list[str]) -> dict[str, list[str]]:
    won: dict[str, list[str]] = {tag: [] for tag in tags}
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(tags))

    def worker(tag: str) -> None:
        try:
            barrier.wait(timeout=DEFAULT_TIMEOUT)
            for i in range(RACE_KEYS):
                key = f"race/k{i:02d}"
                try:
                    store.put_if_absent(key, race_payload(tag, key))
                except AlreadyExistsError:
                    continue
                won[tag].append(key)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(tag,)) for tag in tags]
    for t in threads:
        t.start()
    join_all(threads)
    assert not errors, errors
    return won


def _race_processes(uri: str, tags: list[str], tmp_path: Path) -> dict[str, list[str]]:
    go = tmp_path / f"go-{uuid.uuid4().hex}"
    procs = {
        tag: subprocess.Popen(
            [sys.executable, WORKERS, "race", uri, tag, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in tags
    }
    try:
        for proc in procs.values():
            assert proc.stdout is not None
            assert read_line(proc.stdout) == "ready"
        go.touch()  # all start racing together
        won = {}
        for tag, proc in procs.items():
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            won[tag] = whole_lines(out)
        return won
    finally:
        stop(procs.values())


def test_put_if_absent_race(store: Storage, store_uri: str, tmp_path: Path) -> None:
    """8 writers race to create the same 20 keys: exactly one wins each key."""
    tags = [f"writer{w}" for w in range(8)]
    if store.uri.startswith("memory://"):
        won = _race_threads(store, tags)  # a memory store lives in one process
    else:
        won = _race_processes(store_uri, tags, tmp_path)
    winners = Counter(key for keys in won.values() for key in keys)
    expected = {f"race/k{i:02d}" for i in range(RACE_KEYS)}
    assert set(winners) == expected
    assert all(count == 1 for count in winners.values()), winners
    for tag, keys in won.items():
        for key in keys:
            assert store.get(key) == race_payload(tag, key)
    assert {o.path for o in store.list("race").objects} == expected


def test_local_put_is_atomic_for_readers(tmp_path: Path) -> None:
    """A reader never sees a partial object while a writer keeps replacing it."""
    store = open_storage(str(tmp_path / "s"), create=True)
    versions = [b"a" * (3 * 1024 * 1024), b"b" * (5 * 1024 * 1024), b"c" * 1024]
    store.put("obj", versions[0])
    done = threading.Event()
    seen: Counter[bytes] = Counter()
    bad: list[tuple[int, bytes]] = []
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            reads = 0
            while not done.is_set() or reads == 0:
                data = store.get("obj")
                reads += 1
                if data in versions:
                    seen[data[:1]] += 1
                else:
                    bad.append((len(data), data[:1] + data[-1:]))
        except BaseException as e:  # reported below
            errors.append(e)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(60):
            store.put("obj", versions[(i + 1) % len(versions)])
    finally:
        done.set()
        join_all([thread])
    assert not errors, errors
    assert not bad, bad[:5]
    assert sum(seen.values()) > 0
    assert store.get("obj") == versions[60 % len(versions)]
    # no temporary files are visible in listings afterwards
    assert [o.path for o in store.list().objects] == ["obj"]
