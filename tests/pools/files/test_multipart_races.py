"""Multipart uploads under concurrency: threads and processes uploading parts of one
upload (the same part numbers too), completions racing part uploads and each other.

S3's 5 MiB minimum for every part but the last is scaled down to 1 KiB here
(``MIN_PART_SIZE``) so that many parts stay cheap; the rules are the same.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from limno.errors import MultipartError
from limno.lake import Lake
from limno.pools.files import multipart as mp
from limno.pools.files.blobs import BLOB_DIR
from limno.pools.files.multipart import Multipart
from limno.pools.files.pool import FilePool

SMALL = 1024
#: how long a test waits for its threads or worker processes
TIMEOUT = 120.0


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mp, "MIN_PART_SIZE", SMALL)


@pytest.fixture
def pool(store_uri: str) -> FilePool:
    lake = Lake.init(store_uri)
    lake.create_pool("files", kind="files")
    return lake.file_pool("files")


def part_bytes(number: int, tag: str = "") -> bytes:
    seed = hashlib.sha256(f"{tag}:{number}".encode()).digest()
    return (seed * (2 * SMALL // 32 + number))[: 2 * SMALL + number]


def read(pool: FilePool, path: str) -> bytes:
    return b"".join(pool.read(path, "main"))


def leftovers(pool: FilePool) -> list[str]:
    store = pool.storage
    top = f"{pool.id}/multipart"
    return [o.path for o in store.walk(top)] + [o.path for o in store.list_partial(top)]


def run_threads(n: int, fn: Callable[[int], object]) -> list[object]:
    """``fn(i)`` for i < n on n threads started together; their results (or errors)."""
    barrier = threading.Barrier(n, timeout=TIMEOUT)

    def go(i: int) -> object:
        barrier.wait()
        try:
            return fn(i)
        except MultipartError as e:
            return e

    with ThreadPoolExecutor(n) as ex:
        return list(ex.map(go, range(n), timeout=TIMEOUT))


def test_threads_upload_parts_of_one_upload(pool: FilePool) -> None:
    m = Multipart(pool)
    uid = m.create("main", "many")
    numbers = list(range(1, 25))
    run_threads(8, lambda i: [m.upload_part(uid, n, part_bytes(n)) for n in numbers[i::8]])
    parts, more = m.list_parts(uid)
    assert [p.number for p in parts] == numbers and not more
    assert all(p.etag == hashlib.md5(part_bytes(p.number)).hexdigest() for p in parts)
    entry = m.complete(uid, [(p.number, p.etag) for p in parts])
    assert read(pool, "many") == b"".join(part_bytes(n) for n in numbers)
    assert entry.etag.endswith("-24")
    assert leftovers(pool) == []


def test_threads_race_on_one_part_number(pool: FilePool) -> None:
    """Every racer's part is whole: the winner's record names the winner's bytes."""
    m = Multipart(pool)
    for round_ in range(3):
        uid = m.create("main", f"r{round_}")

        def race(i: int, uid: str = uid) -> mp.Part:
            return m.upload_part(uid, 1, part_bytes(1, f"racer{i}"))

        run_threads(6, race)
        m.upload_part(uid, 2, b"tail")
        (one, two), _ = m.list_parts(uid)
        candidates = {hashlib.md5(part_bytes(1, f"racer{i}")).hexdigest(): i for i in range(6)}
        assert one.etag in candidates
        m.complete(uid, [(1, one.etag), (2, two.etag)])
        winner = candidates[one.etag]
        assert read(pool, f"r{round_}") == part_bytes(1, f"racer{winner}") + b"tail"
    assert leftovers(pool) == []


def test_complete_races_a_part_upload(pool: FilePool) -> None:
    """A part uploaded while the upload completes is either in time (and dropped, being
    unlisted) or refused; nothing of it stays behind either way."""
    m = Multipart(pool)
    for round_ in range(3):
        uid = m.create("main", f"c{round_}")
        listed = [m.upload_part(uid, n, part_bytes(n)) for n in (1, 2)]

        def act(i: int, uid: str = uid, listed: list[mp.Part] = listed) -> object:
            if i == 0:
                return m.complete(uid, [(p.number, p.etag) for p in listed])
            return m.upload_part(uid, 3, part_bytes(3))

        results = run_threads(2, act)
        assert not isinstance(results[0], Exception), results[0]
        late = results[1]
        assert isinstance(late, mp.Part) or (
            isinstance(late, MultipartError) and late.reason == "no-upload"
        ), late
        assert read(pool, f"c{round_}") == part_bytes(1) + part_bytes(2)
        assert leftovers(pool) == []


def test_two_completions_of_one_upload(pool: FilePool) -> None:
    m = Multipart(pool)
    uid = m.create("main", "twice")
    listed = [m.upload_part(uid, n, part_bytes(n)) for n in (1, 2, 3)]
    results = run_threads(2, lambda i: m.complete(uid, [(p.number, p.etag) for p in listed]))
    done = [r for r in results if not isinstance(r, MultipartError)]
    assert done, results
    assert all(r.reason == "no-upload" for r in results if isinstance(r, MultipartError))
    assert read(pool, "twice") == b"".join(part_bytes(n) for n in (1, 2, 3))
    assert leftovers(pool) == []
    # a completion that lost left a blob no entry names: vacuum frees it
    staged = pool.stat("twice", "main")
    pool.vacuum(grace=dt.timedelta(0))
    blobs = [o.path.rsplit("/", 1)[-1] for o in pool.storage.walk(f"{pool.id}/{BLOB_DIR}")]
    assert blobs == [staged.object]


_WORKER = """
import sys
from limno.lake import Lake
from limno.pools.files.multipart import Multipart
sys.path.insert(0, {tests!r})
from test_multipart_races import part_bytes
lake = Lake.open({uri!r})
m = Multipart(lake.file_pool("files"))
for n in {numbers!r}:
    part = m.upload_part({uid!r}, n, part_bytes(n, {tag!r}))
    print(n, part.etag, flush=True)
"""


#: a memory store lives in one process: not parametrized
@pytest.mark.slow
@pytest.mark.parametrize(
    "store_uri", ["local", pytest.param("s3", marks=pytest.mark.s3)], indirect=True
)
def test_processes_upload_parts_of_one_upload(pool: FilePool, store_uri: str) -> None:
    """Three processes upload parts 1..12 (each also part 13, racing) of one upload."""
    m = Multipart(pool)
    uid = m.create("main", "proc")
    tests = str(Path(__file__).parent)
    procs = []
    for w in range(3):
        numbers = [*range(w + 1, 13, 3), 13]
        code = _WORKER.format(tests=tests, uri=store_uri, numbers=numbers, uid=uid, tag="")
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        )
    for proc in procs:
        out, err = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0, err.decode()
        assert len(out.splitlines()) == 5
    parts, _ = m.list_parts(uid)
    assert [p.number for p in parts] == list(range(1, 14))
    m.complete(uid, [(p.number, p.etag) for p in parts])
    assert read(pool, "proc") == b"".join(part_bytes(n) for n in range(1, 14))
    assert leftovers(pool) == []
