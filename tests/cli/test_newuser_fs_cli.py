"""What a new user met downloading a file pool that S3 tools had written: a directory
marker (``dir/``, zero bytes, as ``aws s3api put-object --key dir/``, the S3 console
and Hadoop's s3a make) and a file that is also a directory's name (``a`` and
``a/b``, which S3 allows); on a lake's path and through a server (``lake``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from git_scenarios import error_line, fail, ok
from limno import Lake

pytestmark = pytest.mark.usefixtures("isolated_home")


def _pool(lake_path: str, files: dict[str, bytes]) -> None:
    """Pool imgs with ``files`` staged on main (with the API: the CLI makes no markers)."""
    pool = Lake.open(lake_path).create_pool("imgs", kind="files")
    for path, data in files.items():
        pool.put("main", path, data)


def test_download_of_a_folder_with_its_own_marker(
    lake: str, lake_path: str, tmp_path: Path
) -> None:
    """``download -r imgs/folder/`` refused the marker ``folder/`` itself ("not a safe
    local file name") and downloaded nothing; ``aws s3 sync`` makes the directory."""
    _pool(lake_path, {"folder/": b"", "folder/a.txt": b"a", "folder/sub/": b"", "top.txt": b"t"})
    out = tmp_path / "out"
    r = ok("--lake", lake, "fs", "download", "-r", "imgs/folder/", str(out))
    assert "downloaded 1 file(s), 1 bytes" in r.err
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == ["a.txt", "sub"]
    assert (out / "sub").is_dir() and (out / "a.txt").read_bytes() == b"a"
    whole = tmp_path / "whole"
    ok("--lake", lake, "fs", "download", "-r", "imgs", str(whole))
    assert sorted(str(p.relative_to(whole)) for p in whole.rglob("*")) == [
        "folder",
        "folder/a.txt",
        "folder/sub",
        "top.txt",
    ]


def test_a_file_that_is_also_a_directory_is_refused_before_any_byte(
    lake: str, lake_path: str, tmp_path: Path
) -> None:
    """``a`` and ``a/b`` both exist: the download wrote ``a/b`` and then failed with
    "internal error: IsADirectoryError"; now one line names both, and nothing is written."""
    _pool(lake_path, {"clash/a": b"1", "clash/a/b": b"2", "clash/c": b"3"})
    out = tmp_path / "out"
    line = error_line(fail("--lake", lake, "fs", "download", "-r", "imgs/clash", str(out)))
    assert "'clash/a' is a file and a directory ('clash/a/b')" in line
    assert not out.exists()


def test_a_local_obstacle_is_one_error_line(lake: str, lake_path: str, tmp_path: Path) -> None:
    """A local file where the download needs a directory was an internal error."""
    _pool(lake_path, {"d/x.txt": b"x"})
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "d").write_bytes(b"in the way")
    line = error_line(fail("--lake", lake, "fs", "download", "-r", "imgs", str(tmp_path / "out")))
    assert line.endswith("out/d: a file is in the way") and "cannot make directory" in line
    assert (tmp_path / "out" / "d").read_bytes() == b"in the way"
    blocked = tmp_path / "file"
    blocked.write_bytes(b"")
    line = error_line(fail("--lake", lake, "fs", "download", "imgs/d/x.txt", str(blocked / "y")))
    assert "cannot write" in line and "internal error" not in line
