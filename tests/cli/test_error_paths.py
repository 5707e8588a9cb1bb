"""OS and Arrow failures end as one ``error:`` line, name what failed and change nothing.

The failures are real: a damaged data object on disk, a lake the process may not
write (root runs without the capabilities that override file permissions), a file
size limit (``RLIMIT_FSIZE`` with ``SIGXFSZ`` ignored: writes fail with EFBIG, as
on a full disk). Commands run as subprocesses of the installed ``limno`` entry
point, started through a small launcher that sets the limit or drops the
capabilities and then execs it.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from obstore.store import LocalStore

from clirunner import ok, run
from lake_modes import local_only, located
from limno.errors import CorruptError, StorageError
from limno.lake import Lake
from limno.storage._obstore import ObStorage

#: the installed entry point (``[project.scripts]``), beside the interpreter running the tests
LIMNO = shutil.which("limno", path=os.path.dirname(sys.executable)) or shutil.which("limno")

#: sets a file-size limit and/or drops the capabilities that let root ignore file
#: permissions, then execs the command; argv: FSIZE (-1: none) DROP_CAPS (0/1) CMD...
LAUNCHER = """
import ctypes, os, resource, signal, sys
fsize, drop_caps = int(sys.argv[1]), sys.argv[2] == "1"
if fsize >= 0:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an ignored SIGXFSZ survives exec
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
if drop_caps:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP: gone after exec
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")
os.execv(sys.argv[3], sys.argv[3:])
"""

SUBPROCESS_TIMEOUT = 120


@dataclass
class Outcome:
    code: int
    out: bytes
    err_lines: list[str]


#: what a client of a served lake keeps of the LIMNO_ environment: its key
CREDENTIALS = ("LIMNO_ACCESS_KEY_ID", "LIMNO_SECRET_ACCESS_KEY")


def limno(
    lake: Path,
    *args: str,
    fsize: int = -1,
    unprivileged: bool = False,
    stdout: Path | None = None,
    python: str | None = None,
    location: str | None = None,
) -> Outcome:
    """Run ``limno --lake LAKE ARGS...`` in a child process (or ``python`` code);
    ``--lake location`` instead when given (a server on the lake)."""
    assert LIMNO is not None, "the limno entry point is not installed beside the interpreter"
    drop = unprivileged and os.geteuid() == 0
    target = [sys.executable, "-c", python] if python else [LIMNO]
    cmd = [sys.executable, "-c", LAUNCHER, str(fsize), "1" if drop else "0", *target]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIMNO_") or k in CREDENTIALS}
    env["HOME"] = str(lake.parent / "home")
    sink = open(stdout, "wb") if stdout else None  # noqa: SIM115 (closed below)
    try:
        proc = subprocess.run(
            [*cmd, "--lake", location or str(lake), *args],
            stdout=sink or subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            timeout=SUBPROCESS_TIMEOUT,
        )
    finally:
        if sink is not None:
            sink.close()
    err = proc.stderr.decode(errors="replace")
    return Outcome(proc.returncode, proc.stdout or b"", [x for x in err.splitlines() if x.strip()])


def one_error(r: Outcome) -> str:
    """The single ``error:`` line of a failed command."""
    assert r.code != 0, "the command unexpectedly succeeded"
    assert len(r.err_lines) == 1, r.err_lines
    assert r.err_lines[0].startswith("error: "), r.err_lines
    return r.err_lines[0]


def lake_state(lake: Path) -> tuple[list[str], list[dict[str, object]], dict[str, int]]:
    """What must not change: verify's report, the branch heads, every file and its size."""
    verify = run("--lake", str(lake), "verify", "--deep")
    report = sorted((verify.err + verify.text).splitlines())
    heads = ok("--lake", str(lake), "-f", "ndjson", "query", 'SELECT * FROM "logs:branches"')
    files = {
        str(p.relative_to(lake)): p.stat().st_size for p in sorted(lake.rglob("*")) if p.is_file()
    }
    return report, heads.rows(), files


def rows(first: int, n: int) -> list[dict[str, object]]:
    """Deterministic records whose text compresses poorly (so pages hold real data)."""
    return [
        {"ts": i, "level": "info", "msg": f"event {i * 7919 % 100003:06d} {i * 31337 % 9973}"}
        for i in range(first, first + n)
    ]


def write_ndjson(path: Path, records: list[dict[str, object]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


@pytest.fixture(scope="module")
def base_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lake with pool ``logs`` and two objects (ts 0..3999 and 4000..5999)."""
    where = tmp_path_factory.mktemp("base")
    lake = where / "lake"
    ok("--lake", str(lake), "init")
    ok("--lake", str(lake), "create", "logs", "-k", "ts")
    for name, first, n in (("a", 0, 4000), ("b", 4000, 2000)):
        ok("--lake", str(lake), "load", "-p", "logs", write_ndjson(where / name, rows(first, n)))
    return lake


@pytest.fixture
def lake(base_lake: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "lake"
    shutil.copytree(base_lake, copy)
    return copy


@pytest.fixture
def location(lake: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """What the command under test names with ``--lake``: the lake's path, or a
    server on it (``mode``); the lake's files are damaged and inspected at its path."""
    with located(str(lake), mode, monkeypatch) as where:
        yield where


#: the failure is the writing process's own (its privileges, its file-size limit), and
#: through a server the server writes the lake
WRITER_FAILS = local_only("the process writing the lake fails; served, that is the server")


def first_object(lake: Path) -> tuple[str, list[str], Path]:
    """The pool id, both object ids and the file of the object holding ts 0..3999."""
    objects = ok("--lake", str(lake), "-f", "ndjson", "query", 'SELECT id FROM "logs:objects"')
    ids = [str(r["id"]) for r in objects.rows()]
    pool_id = ok("--lake", str(lake), "ls").rows()[0]["id"]
    assert isinstance(pool_id, str) and len(ids) == 2
    files = [lake / pool_id / "data" / f"{i}.parquet" for i in ids]
    (first,) = [f for f in files if pq.ParquetFile(f).metadata.num_rows == 4000]
    return pool_id, ids, first


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_middle(path: Path) -> None:
    """Flip bytes in the middle so the footer still parses but a page fails to decode."""
    data = path.read_bytes()
    middle = len(data) // 2
    for offset in range(middle, middle + 4096, 128):
        damaged = bytearray(data)
        for i in range(offset, offset + 32):
            damaged[i] ^= 0xA5
        path.write_bytes(bytes(damaged))
        assert pq.ParquetFile(path).metadata.num_rows == 4000  # the footer is intact
        try:
            pq.read_table(path)
        except (pa.ArrowException, OSError):
            return
    raise AssertionError(f"no flip near the middle of {path} made it unreadable")


DAMAGE = {"truncated": truncate, "flipped": flip_middle}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("command", ["scan", "get", "query", "compact", "delete-where"])
def test_damaged_object_is_named_and_nothing_changes(
    lake: Path, location: str, damage: str, command: str
) -> None:
    pool_id, ids, victim = first_object(lake)
    DAMAGE[damage](victim)
    before = lake_state(lake)
    object_path = f"{pool_id}/data/{victim.name}"
    assert any(object_path in line for line in before[0]), before[0]  # verify --deep finds it

    args = {
        "scan": ["scan", "-p", "logs"],
        "get": ["get", "-p", "logs", "17"],
        "query": ["query", "SELECT * FROM logs"],
        "compact": ["compact", "-p", "logs", *ids],
        "delete-where": ["delete", "-p", "logs", "--where", "ts % 2 = 0"],
    }[command]
    line = one_error(limno(lake, *args, location=location))
    assert f"data object {object_path} of pool logs is damaged (" in line
    assert line.endswith("; run 'limno verify --deep logs'")
    assert lake_state(lake) == before


@WRITER_FAILS
@pytest.mark.usefixtures("mode")
def test_unwritable_lake_is_one_line_and_reads_still_work(lake: Path, tmp_path: Path) -> None:
    more = write_ndjson(tmp_path / "more.ndjson", rows(10000, 10))
    before = lake_state(lake)
    modes = {p: p.stat().st_mode for p in [lake, *lake.rglob("*")]}
    for p in modes:
        p.chmod(modes[p] & ~0o222)
    try:
        for args in (
            ["load", "-p", "logs", more],
            ["create", "other", "-k", "ts"],
            ["branch", "-p", "logs", "dev"],
        ):
            line = one_error(limno(lake, *args, unprivileged=True))
            assert line.startswith(f"error: cannot write {lake}/"), line
            assert line.endswith(": permission denied"), line
        scan = limno(lake, "get", "-p", "logs", "5", unprivileged=True)
        assert scan.code == 0, scan.err_lines
        assert [json.loads(x)["ts"] for x in scan.out.splitlines()] == [5]
    finally:
        for p, mode in modes.items():
            p.chmod(mode)
    assert lake_state(lake) == before


@WRITER_FAILS
@pytest.mark.usefixtures("mode")
def test_full_disk_during_load_commits_nothing(lake: Path, tmp_path: Path) -> None:
    big = write_ndjson(tmp_path / "big.ndjson", rows(10000, 20000))
    before = lake_state(lake)
    line = one_error(limno(lake, "load", "-p", "logs", big, fsize=16384))
    assert line.startswith(f"error: cannot write {lake}/"), line
    assert "/data/" in line and line.endswith(".parquet: file too large"), line
    assert lake_state(lake) == before


SMALL_SORT_LOAD = """
import sys
import limno.pools.records.pool as pool
from limno.cli import main

pool.SORT_MEMORY = 64 * 1024  # spill sorted runs to TMPDIR at once
main(sys.argv[1:])
"""


@WRITER_FAILS
@pytest.mark.usefixtures("mode")
def test_full_disk_while_spilling_a_sort(
    lake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # out of key order: input already sorted streams to the encoders and never spills
    big = write_ndjson(tmp_path / "big.ndjson", rows(10000, 20000)[::-1])
    spill = tmp_path / "spill"
    spill.mkdir()
    before = lake_state(lake)
    monkeypatch.setenv("TMPDIR", str(spill))
    r = limno(lake, "load", "-p", "logs", big, fsize=16384, python=SMALL_SORT_LOAD)
    line = one_error(r)
    assert line.startswith(f"error: cannot write {spill}/limno-sort-"), line
    assert line.endswith(".parquet: file too large"), line
    assert lake_state(lake) == before
    assert list(spill.iterdir()) == []  # the spill directory is removed


@pytest.mark.parametrize("fmt", ["table", "ndjson", "parquet"])
def test_full_disk_on_output(lake: Path, location: str, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "out"
    r = limno(lake, "-f", fmt, "scan", "-p", "logs", fsize=8192, stdout=out, location=location)
    assert one_error(r) == "error: cannot write standard output: file too large"


def test_store_errors_name_the_path_and_the_reason(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    (root / "file").write_bytes(b"x")
    store = ObStorage(LocalStore(str(root)), root.as_uri(), root=str(root))
    with pytest.raises(StorageError) as caught:
        store.put("file/below", b"y")  # a file where a directory must be
    reason = os.strerror(errno.ENOTDIR).lower()
    assert str(caught.value) == f"cannot write {root}/file/below: {reason}"
    with pytest.raises(StorageError, match=f"^cannot write {root}/file/x: file exists$"):
        store.staging_file("file/x")  # its directory cannot be made


def test_damaged_object_on_a_remote_store_is_named(tmp_path: Path) -> None:
    """Objects of a non-local store are read by ranged requests: same error."""
    lake = Lake.init("memory://damaged-remote")
    pool = lake.create_pool("logs", key="ts")
    pool.load([write_ndjson(tmp_path / "a.ndjson", rows(0, 100))])
    (obj,) = pool.objects()
    path = f"{pool.id}/data/{obj.id}.parquet"
    lake.storage.put(path, lake.storage.get(path)[:-100])
    for read in (pool.scan, pool.table, lambda: pool.get([5])):
        with pytest.raises(CorruptError) as caught:
            read()
        assert str(caught.value).startswith(f"data object {path} of pool logs is damaged (")
        assert caught.value.reason


def test_internal_error_is_one_line_and_a_traceback_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import limno.api as api  # what the CLI opens lakes with

    def broken(location: str) -> Lake:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(api.Lake, "open", broken)
    monkeypatch.delenv("LIMNO_DEBUG", raising=False)
    r = run("--lake", str(tmp_path), "verify")
    assert r.code == 1
    assert r.err.splitlines() == [
        "error: internal error: RuntimeError: boom (set LIMNO_DEBUG=1 for a traceback)"
    ]
    monkeypatch.setenv("LIMNO_DEBUG", "1")
    r = run("--lake", str(tmp_path), "verify")
    assert r.code == 1
    lines = r.err.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert "RuntimeError: boom" in r.err
    assert lines[-1] == "error: internal error: RuntimeError: boom"
