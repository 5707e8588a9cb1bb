"""``limno ingest``: submit, run, ls, retry, drop, config, and the batcher's report in
``limno status`` — each on a lake's path and through a real ``limno serve`` (where a
submitted local file is uploaded, and URLs the server reads need an admin)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from clirunner import fail, ok, run
from lake_modes import SERVED, located
from limno.api.local import LocalLake
from limno.storage import open_storage
from server_support import served_user, start_server

pytestmark = pytest.mark.usefixtures("isolated_home")


def ndjson(path: Path, keys: range) -> str:
    path.write_text("".join(json.dumps({"ts": k, "msg": f"m{k}"}) + "\n" for k in keys))
    return str(path)


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.fixture
def pool(lake: str) -> str:
    """Pool ``logs`` (key ts) on the test's lake; ``--lake`` for it."""
    ok("--lake", lake, "create", "logs", "-k", "ts")
    return lake


def test_submit_run_list_and_status(pool: str, tmp_path: Path, mode: str) -> None:
    files = [ndjson(tmp_path / f"part-{i}.ndjson", range(i * 10, i * 10 + 4)) for i in range(3)]
    ok("--lake", pool, "ingest", "config", "-p", "logs", "max-files=2")
    submitted = ok("--lake", pool, "ingest", "submit", "-p", "logs", *files)
    ids = lines(submitted.text)
    assert len(ids) == 3 and "queued 3 file(s)" in submitted.err
    queued = ok("--lake", pool, "-f", "ndjson", "ingest", "ls", "-p", "logs").rows()
    assert [(r["id"], r["name"], r["state"]) for r in queued] == [
        (i, f, "queued") for i, f in zip(ids, files, strict=True)
    ]
    assert [r["size"] for r in queued] == [Path(f).stat().st_size for f in files]
    done = ok("--lake", pool, "ingest", "run", "-p", "logs")
    commits = lines(done.text)
    assert len(commits) == 2 and done.err.count("ingest job ") == 2
    log = ok("--lake", pool, "-f", "ndjson", "log", "-p", "logs").rows()
    assert [c["id"] for c in log[:2]] == commits[::-1]
    rows = ok("--lake", pool, "-f", "ndjson", "scan", "-p", "logs").rows()
    assert [r["ts"] for r in rows] == [i * 10 + j for i in range(3) for j in range(4)]
    listed = ok("--lake", pool, "-f", "ndjson", "ingest", "ls", "-p", "logs").rows()
    assert {r["state"] for r in listed} == {"done"}
    assert len({r["job"] for r in listed}) == 2
    jobs = ok("--lake", pool, "-f", "ndjson", "ingest", "ls", "-p", "logs", "--jobs").rows()
    assert [(j["state"], j["files"], j["rows"]) for j in jobs] == [("done", 2, 8), ("done", 1, 4)]
    assert sorted(j["commit"] for j in jobs) == sorted(commits)
    assert all(j["bytes"] > 0 for j in jobs)
    status = ok("--lake", pool, "-f", "ndjson", "status", "logs").rows()
    batches = [r for r in status if r["report"] == "ingest_batches"]
    assert [(b["id"], b["state"], b["commit"]) for b in batches] == [
        (j["id"], "done", j["commit"]) for j in jobs
    ]
    again = ok("--lake", pool, "ingest", "run")  # every pool: nothing left
    assert again.text == "" and "no ingest job was due" in again.err
    if mode == SERVED:  # the server keeps uploads in the lake until they are loaded
        assert all(r["name"] == f for r, f in zip(listed, files, strict=True))


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "parquet", "arrow"])
def test_ls_in_every_format(pool: str, tmp_path: Path, fmt: str) -> None:
    ok("--lake", pool, "ingest", "submit", "-p", "logs", ndjson(tmp_path / "a.ndjson", range(2)))
    out = ok("--lake", pool, "-f", fmt, "ingest", "ls", "-p", "logs").out
    assert out
    if fmt in ("table", "json", "csv"):  # a table cuts long cells (the path) short
        assert b"queued" in out and (fmt == "table" or b"a.ndjson" in out)


def test_a_bad_file_fails_its_job_and_can_be_dropped(pool: str, tmp_path: Path) -> None:
    good = ndjson(tmp_path / "good.ndjson", range(3))
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"ts": 1, "msg": \n')
    other = ndjson(tmp_path / "other.ndjson", range(10, 12))
    ok("--lake", pool, "ingest", "config", "-p", "logs", "max-files=2")
    ok("--lake", pool, "ingest", "submit", "-p", "logs", good, str(bad), other)
    r = fail("--lake", pool, "ingest", "run", "-p", "logs")
    assert "1 of 2 ingest job(s) failed" in r.err
    assert f"{bad}: line 1: invalid JSON" in r.err
    assert len(lines(r.text)) == 1  # the other job's commit
    listed = ok("--lake", pool, "-f", "ndjson", "ingest", "ls", "-p", "logs").rows()
    by_name = {row["name"]: row for row in listed}
    assert by_name[str(bad)]["state"] == by_name[good]["state"] == "failed"
    assert "invalid JSON" in by_name[str(bad)]["error"]
    assert by_name[other]["state"] == "done"
    ok("--lake", pool, "ingest", "drop", "-p", "logs", by_name[str(bad)]["id"])
    ok("--lake", pool, "ingest", "retry", "-p", "logs", by_name[good]["job"])
    assert len(lines(ok("--lake", pool, "ingest", "run", "-p", "logs").text)) == 1
    rows = ok("--lake", pool, "-f", "ndjson", "scan", "-p", "logs").rows()
    assert [r["ts"] for r in rows] == [0, 1, 2, 10, 11]
    r = fail("--lake", pool, "ingest", "retry", "-p", "logs", by_name[other]["id"])
    assert "not failed" in r.err


def test_submit_refuses_what_it_cannot_queue(pool: str, tmp_path: Path) -> None:
    good = ndjson(tmp_path / "a.ndjson", range(2))
    r = fail("--lake", pool, "ingest", "submit", "-p", "logs", good, str(tmp_path / "nope.csv"))
    assert "nope.csv: no such file" in r.err
    assert "not stdin" in fail("--lake", pool, "ingest", "submit", "-p", "logs", "-").err
    assert "branch" in fail("--lake", pool, "ingest", "submit", "-p", "logs@nope", good).err
    err = fail("--lake", pool, "ingest", "run", "-p", "logs@nope").err
    assert err == "error: branch 'nope' not found\n"
    assert ok("--lake", pool, "ingest", "ls", "-p", "logs", "-f", "ndjson").out == b""
    ok("--lake", pool, "ingest", "submit", "-p", "logs", "-i", "ndjson", good)
    row = ok("--lake", pool, "-f", "ndjson", "ingest", "ls", "-p", "logs").rows()[0]
    assert row["format"] == "ndjson"
    r = run("--lake", pool, "ingest", "submit", "-p", "logs", "-i", "xml", good)
    assert r.code == 2  # a usage error: click's choice


def test_config_shows_and_changes_the_settings(pool: str, tmp_path: Path) -> None:
    shown = ok("--lake", pool, "-f", "ndjson", "ingest", "config", "-p", "logs").rows()
    assert {r["setting"]: r["value"] for r in shown} == {
        "min-files": "1",
        "max-files": "100",
        "min-bytes": "0B",
        "max-bytes": "1GiB",
        "max-age": "300s",
    }
    ok("--lake", pool, "ingest", "config", "-p", "logs", "min-files=3", "max-age=1h")
    shown = ok("--lake", pool, "-f", "ndjson", "ingest", "config", "-p", "logs").rows()
    assert {r["setting"]: r["value"] for r in shown}["max-age"] == "3600s"
    ok("--lake", pool, "ingest", "submit", "-p", "logs", ndjson(tmp_path / "a.ndjson", range(2)))
    assert ok("--lake", pool, "ingest", "run", "-p", "logs").text == ""  # waits for 3 files
    assert len(lines(ok("--lake", pool, "ingest", "run", "-p", "logs", "--flush").text)) == 1
    r = fail("--lake", pool, "ingest", "config", "-p", "logs", "min-files=0")
    assert "min-files" in r.err
    assert "colour" in fail("--lake", pool, "ingest", "config", "-p", "logs", "colour=red").err


def test_manage_runs_the_batcher(lake_path: str, tmp_path: Path) -> None:
    """``limno manage`` runs next to the lake (never through a server)."""
    ok("--lake", lake_path, "init")
    ok("--lake", lake_path, "create", "logs", "-k", "ts")
    ok(
        "--lake",
        lake_path,
        "ingest",
        "submit",
        "-p",
        "logs",
        ndjson(tmp_path / "a.ndjson", range(4)),
    )
    r = ok("--lake", lake_path, "manage", "--once")
    assert "logs@main: ingest " in r.err
    assert len(ok("--lake", lake_path, "-f", "ndjson", "scan", "-p", "logs").rows()) == 4


@pytest.fixture
def bucket_file(s3_endpoint: str, tmp_path: Path) -> str:
    """An NDJSON object on the loopback S3 server; its URL."""
    from s3_support import make_bucket

    bucket = make_bucket(s3_endpoint)
    open_storage(f"s3://{bucket}").put(
        "in/data.ndjson", Path(ndjson(tmp_path / "d", range(5))).read_bytes()
    )
    return f"s3://{bucket}/in/data.ndjson"


@pytest.mark.s3
def test_s3_urls_are_read_where_the_lake_is(
    bucket_file: str, lake_path: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok("--lake", lake_path, "init")
    ok("--lake", lake_path, "create", "logs", "-k", "ts")
    with located(lake_path, mode, monkeypatch) as where:
        r = fail("--lake", where, "ingest", "submit", "-p", "logs", bucket_file + "-missing")
        assert "no such object" in r.err
        ok("--lake", where, "ingest", "submit", "-p", "logs", bucket_file)
        row = ok("--lake", where, "-f", "ndjson", "ingest", "ls", "-p", "logs").rows()[0]
        assert (row["name"], row["state"]) == (bucket_file, "queued")
        assert len(lines(ok("--lake", where, "ingest", "run").text)) == 1
        assert len(ok("--lake", where, "-f", "ndjson", "scan", "-p", "logs").rows()) == 5


def test_through_a_server_uploads_are_a_writers_urls_an_admins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = str(tmp_path / "lake")
    LocalLake.init(lake).create_pool("logs", key="ts")
    server = start_server(lake)
    try:
        dev = served_user(server, "dev", "developer")
        ana = served_user(server, "ana", "analyst")
        data = ndjson(tmp_path / "a.ndjson", range(3))
        for name, value in dev.items():
            monkeypatch.setenv(name, value)
        ok("--lake", server.url, "ingest", "submit", "-p", "logs", data)
        r = fail("--lake", server.url, "ingest", "submit", "-p", "logs", "s3://b/x.ndjson")
        assert "may not administer the lake" in r.err
        r = fail("--lake", server.url, "ingest", "submit", "-p", "logs", data, "s3://b/x.ndjson")
        assert "separate calls" in r.err
        for name, value in ana.items():
            monkeypatch.setenv(name, value)
        assert "may not write to pool logs" in fail("--lake", server.url, "ingest", "run").err
        assert (
            len(ok("--lake", server.url, "-f", "ndjson", "ingest", "ls", "-p", "logs").rows()) == 1
        )
        for name, value in dev.items():
            monkeypatch.setenv(name, value)
        assert len(lines(ok("--lake", server.url, "ingest", "run", "-p", "logs").text)) == 1
        rows = ok("--lake", server.url, "-f", "ndjson", "scan", "-p", "logs").rows()
        assert [r["ts"] for r in rows] == [0, 1, 2]
        # not even an admin names a file of the server's own disk
        submit = f"{server.url}/v1/pools/logs/ingest/submit"
        for path in (data, f"file://{data}"):
            answer = httpx.post(submit, json={"paths": [path]}, auth=server.auth, timeout=60)
            assert answer.status_code == 400 and "cannot be named" in answer.text, answer.text
        assert (
            len(ok("--lake", server.url, "-f", "ndjson", "ingest", "ls", "-p", "logs").rows()) == 1
        )
    finally:
        assert server.stop() == 0, server.lines
    pool = LocalLake.open(lake).pool("logs")
    assert len([c for c in pool.log() if "ingest_job" in c.meta]) == 1
    assert list(pool.storage.walk(f"{pool.id}/ingest/files")) == []  # the upload is gone
