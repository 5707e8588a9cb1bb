"""Worker processes for the storage and journal concurrency tests.

Run as ``python tests/_workers.py COMMAND ARGS...``; the store is reached by URI
(S3 settings come from the inherited ``AWS_*`` environment). Every worker prints
one result line per unit of work and flushes, so a parent that kills a worker
knows exactly what the worker had finished.
"""

from __future__ import annotations

import os
import sys
import time

from limno.errors import AlreadyExistsError
from limno.journal import JournalStore, Put
from limno.storage import open_storage

RACE_KEYS = 20


def race_payload(tag: str, key: str) -> bytes:
    """The bytes worker ``tag`` tries to create at ``key`` (unique per worker and key)."""
    return f"{tag}:{key}:".encode() + tag.encode() * 64


#: how long a worker waits for the go file before giving up (its parent died or failed)
GO_TIMEOUT = 120.0


def _wait_for(path: str) -> None:
    deadline = time.monotonic() + GO_TIMEOUT
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit(f"no go file {path} after {GO_TIMEOUT}s")
        time.sleep(0.001)


def put_if_absent_race(uri: str, tag: str, go_file: str) -> None:
    """Try to create every race key; print the keys this worker created."""
    store = open_storage(uri)
    print("ready", flush=True)
    _wait_for(go_file)
    for i in range(RACE_KEYS):
        key = f"race/k{i:02d}"
        try:
            store.put_if_absent(key, race_payload(tag, key))
        except AlreadyExistsError:
            continue
        print(key, flush=True)


def append(uri: str, prefix: str, worker: int, count: int, go_file: str) -> None:
    """Commit ``count`` puts with unique keys ``w<worker>-<j>``; print each number."""
    js = JournalStore(open_storage(uri), prefix)
    print("ready", flush=True)
    _wait_for(go_file)
    for j in range(count):
        state = js.commit([Put(f"w{worker}-{j}", {"w": worker, "j": j})])
        print(state.n, flush=True)


def append_forever(uri: str, prefix: str, tag: str, snapshot_every: int) -> None:
    """Commit puts ``<tag>-<i>`` until killed; print ``n key`` after each commit."""
    js = JournalStore(open_storage(uri), prefix, snapshot_every=snapshot_every)
    i = 0
    while True:
        key = f"{tag}-{i}"
        state = js.commit([Put(key, {"i": i, "pad": "x" * (i % 50)})])
        print(state.n, key, flush=True)
        i += 1


def main(argv: list[str]) -> None:
    command, args = argv[0], argv[1:]
    if command == "race":
        put_if_absent_race(args[0], args[1], args[2])
    elif command == "append":
        append(args[0], args[1], int(args[2]), int(args[3]), args[4])
    elif command == "append-forever":
        append_forever(args[0], args[1], args[2], int(args[3]))
    else:
        raise SystemExit(f"unknown worker command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
