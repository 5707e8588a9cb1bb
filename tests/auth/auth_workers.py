"""A worker process for the auth store's concurrency tests (a second server, in effect).

``python auth_workers.py URI TAG COUNT GO_FILE``: waits for GO_FILE, then for
``j < COUNT`` makes a key for user ``shared`` and grants it pool ``TAG-j``,
printing ``KEY_ID`` after each pair (flushed: a printed line is an acknowledgement).
The server secret comes from the inherited ``LIMNO_AUTH_SECRET``.
"""

from __future__ import annotations

import os
import sys
import time

from limno.auth.store import AuthStore
from limno.storage import open_storage


def main(uri: str, tag: str, count: int, go_file: str) -> None:
    store = AuthStore(open_storage(uri))
    print("ready", flush=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(go_file):
        if time.monotonic() > deadline:
            raise SystemExit(f"no go file {go_file}")
        time.sleep(0.001)
    for j in range(count):
        new = store.create_key("shared")
        store.grant("shared", f"{tag}-{j}", "write" if j % 2 else "read")
        print(new.access_key_id, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
