"""``limno init`` / ``limno verify`` through the installed console command, in subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from limno.journal import JournalStore, Put
from limno.storage import open_storage

LIMNO = os.path.join(os.path.dirname(sys.executable), "limno")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user with an empty home and no LIMNO_LAKE."""
    home = tmp_path / "home"
    home.mkdir()
    out = {k: v for k, v in os.environ.items() if k != "LIMNO_LAKE"}
    out["HOME"] = str(home)
    out["XDG_CONFIG_HOME"] = str(home / ".config")
    out["XDG_DATA_HOME"] = str(home / ".local" / "share")
    return out


def limno(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LIMNO, *args],
        env=env,
        cwd=env["HOME"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The single ``error:`` line a failed command must print (and exit 1)."""
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), proc.stderr
    return lines[0]


def _init(env: dict[str, str], where: str) -> None:
    proc = limno(env, "--lake", where, "init")
    assert proc.returncode == 0, proc.stderr


def test_init_then_verify(env: dict[str, str], tmp_path: Path) -> None:
    where = tmp_path / "lake"
    proc = limno(env, "--lake", str(where), "init")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"initialized lake at {where.as_uri()}"
    assert proc.stderr == ""
    doc = json.loads((where / "lake.json").read_text())
    assert doc["format"] == "limno" and doc["version"] == 1
    assert (where / "pools" / "TAIL").read_text().strip() == "1"
    proc = limno(env, "--lake", str(where), "verify")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: ")
    assert where.as_uri() in proc.stdout
    assert proc.stderr == ""


def test_init_twice_fails(env: dict[str, str], tmp_path: Path) -> None:
    where = str(tmp_path / "lake")
    _init(env, where)
    before = (tmp_path / "lake" / "lake.json").read_bytes()
    proc = limno(env, "--lake", where, "init")
    assert "already exists" in _one_error(proc)
    assert proc.stdout == ""
    assert (tmp_path / "lake" / "lake.json").read_bytes() == before


def test_lake_from_environment(env: dict[str, str], tmp_path: Path) -> None:
    where = tmp_path / "from-env"
    env["LIMNO_LAKE"] = str(where)
    proc = limno(env, "init")
    assert proc.returncode == 0, proc.stderr
    assert (where / "lake.json").is_file()
    proc = limno(env, "verify")
    assert proc.returncode == 0, proc.stderr
    assert where.as_uri() in proc.stdout
    assert not (Path(env["HOME"]) / ".local" / "share" / "limno").exists()


def test_flag_beats_environment(env: dict[str, str], tmp_path: Path) -> None:
    from_env, from_flag = tmp_path / "env-lake", tmp_path / "flag-lake"
    env["LIMNO_LAKE"] = str(from_env)
    proc = limno(env, "--lake", str(from_flag), "init")
    assert proc.returncode == 0, proc.stderr
    assert (from_flag / "lake.json").is_file()
    assert not from_env.exists()
    assert limno(env, "--lake", str(from_flag), "verify").returncode == 0
    assert _one_error(limno(env, "verify")).startswith("error: no lake")


def test_default_location(env: dict[str, str]) -> None:
    default = Path(env["HOME"]) / ".local" / "share" / "limno"
    proc = limno(env, "init")
    assert proc.returncode == 0, proc.stderr
    assert (default / "lake.json").is_file()
    assert default.as_uri() in proc.stdout
    proc = limno(env, "verify")
    assert proc.returncode == 0, proc.stderr
    assert default.as_uri() in proc.stdout


def test_verify_missing_lake(env: dict[str, str], tmp_path: Path) -> None:
    line = _one_error(limno(env, "--lake", str(tmp_path / "nowhere"), "verify"))
    assert line.startswith("error: no lake")
    assert not (tmp_path / "nowhere").exists()  # verify creates nothing
    (tmp_path / "empty").mkdir()
    line = _one_error(limno(env, "--lake", str(tmp_path / "empty"), "verify"))
    assert line.startswith("error: no lake")
    assert list((tmp_path / "empty").iterdir()) == []


def _flip(data: bytes) -> bytes:
    return data[:-2] + bytes([data[-2] ^ 0x01]) + data[-1:]


@pytest.mark.parametrize("how", ["flip", "truncate", "garbage", "delete"])
def test_verify_names_corrupt_journal_entry(env: dict[str, str], tmp_path: Path, how: str) -> None:
    where = str(tmp_path / "lake")
    _init(env, where)
    storage = open_storage(where)
    pools = JournalStore(storage, "pools")
    for i in range(3):
        pools.commit([Put(f"entry{i}", {"i": i})])
    path = pools.journal.entry_path(2)
    assert (tmp_path / "lake" / "pools" / "2").is_file()
    data = storage.get(path)
    if how == "flip":
        storage.put(path, _flip(data))
    elif how == "truncate":
        storage.put(path, data[: len(data) // 2])
    elif how == "garbage":
        storage.put(path, b"\x89PNG this is not a journal entry\n")
    else:
        storage.delete(path)
    proc = limno(env, "--lake", where, "verify")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert any("pools/2" in line for line in lines[:-1]), proc.stderr
    assert all(line.startswith("fault: ") for line in lines[:-1]), proc.stderr
    assert lines[-1].startswith("error: ")
    assert "ok:" not in proc.stdout


@pytest.mark.parametrize(
    "content, words",
    [
        (b"{not json", ["lake.json", "JSON"]),
        (b'{"format": "something-else", "version": 1}', ["lake.json", "not a limno lake"]),
        (b'{"format": "limno", "version": 99}', ["lake.json", "99"]),
        (b"", ["lake.json"]),
    ],
)
def test_verify_reports_corrupt_lake_json(
    env: dict[str, str], tmp_path: Path, content: bytes, words: list[str]
) -> None:
    where = tmp_path / "lake"
    _init(env, str(where))
    (where / "lake.json").write_bytes(content)
    proc = limno(env, "--lake", str(where), "verify")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.splitlines()[-1].startswith("error: ")
    for word in words:
        assert word in proc.stderr, proc.stderr
    assert "ok:" not in proc.stdout


def test_verify_without_lake_json(env: dict[str, str], tmp_path: Path) -> None:
    where = tmp_path / "lake"
    _init(env, str(where))
    (where / "lake.json").unlink()
    assert _one_error(limno(env, "--lake", str(where), "verify")).startswith("error: no lake")


def _commands(help_text: str) -> list[str]:
    lines = help_text.splitlines()
    start = lines.index("Commands:") + 1
    names = []
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        name = line.split()[0]
        if not line.startswith("   "):  # continuation lines are indented further
            names.append(name)
    return names


def test_help(env: dict[str, str]) -> None:
    proc = limno(env, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: limno")
    assert "--lake" in proc.stdout and "LIMNO_LAKE" in proc.stdout
    commands = _commands(proc.stdout)
    assert {"init", "verify"} <= set(commands)
    assert limno(env, "-h").stdout == proc.stdout
    # one process per core at a time: all at once would make each wait on the others
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        runs = pool.map(lambda c: limno(env, c, "--help"), commands)
        helps = dict(zip(commands, runs, strict=True))
    for name, child in helps.items():
        assert child.returncode == 0, (name, child.stderr)
        assert child.stdout.startswith(f"Usage: limno {name}"), (name, child.stdout)
        assert child.stderr == ""


def test_usage_errors_exit_2(env: dict[str, str], tmp_path: Path) -> None:
    proc = limno(env, "no-such-command")
    assert proc.returncode == 2
    assert "No such command" in proc.stderr
    proc = limno(env, "--lake")
    assert proc.returncode == 2
    assert not (Path(env["HOME"]) / ".local").exists()


@pytest.mark.s3
def test_s3_lake(env: dict[str, str], s3_uri: str) -> None:
    assert env["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")  # inherited by the child
    proc = limno(env, "--lake", s3_uri, "init")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"initialized lake at {s3_uri}"
    storage = open_storage(s3_uri)
    assert json.loads(storage.get("lake.json"))["format"] == "limno"
    assert storage.exists("pools/TAIL")
    proc = limno(env, "--lake", s3_uri, "verify")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"ok: lake {s3_uri}")
    assert "already exists" in _one_error(limno(env, "--lake", s3_uri, "init"))
    env["LIMNO_LAKE"] = s3_uri
    assert limno(env, "verify").returncode == 0
    # another prefix of the same bucket holds no lake
    other = s3_uri.rsplit("/", 1)[0] + "/elsewhere"
    assert _one_error(limno(env, "--lake", other, "verify")).startswith("error: no lake")
    # corruption on S3 is named too
    pools = JournalStore(storage, "pools")
    for i in range(2):
        pools.commit([Put(f"entry{i}", {"i": i})])
    storage.put("pools/1", b"garbage")
    proc = limno(env, "verify")
    assert proc.returncode == 1
    assert "pools/1" in proc.stderr
