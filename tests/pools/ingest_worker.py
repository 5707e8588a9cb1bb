"""A runner of the ingest batcher in a process of its own (tests/pools/test_ingest_*.py).

``python ingest_worker.py LAKE POOL GO_FILE``: opens the lake, prints ``ready``, waits
for ``GO_FILE`` to exist (so that several workers start together), runs the batcher
once (every waiting file, now) and prints one line per job it ran:
``<job id> <state> <commit or ->``. With ``LIMNO_FAULTS`` set it may die on the way
(tests/pools/test_ingest_crash.py).
"""

from __future__ import annotations

import os
import sys
import time

from limno.api import Lake

#: how long a worker waits for the go file before giving up (its parent failed)
GO_TIMEOUT = 120.0


def main(lake: str, pool_name: str, go_file: str) -> None:
    pool = Lake.open(lake).pool(pool_name)
    print("ready", flush=True)
    deadline = time.monotonic() + GO_TIMEOUT
    while not os.path.exists(go_file):
        if time.monotonic() > deadline:
            raise SystemExit(f"no go file {go_file} after {GO_TIMEOUT}s")
        time.sleep(0.001)
    for job in pool.ingest_run(force=True):
        print(job.id, job.state, job.commit or "-", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
