"""One client process of the replica test: small writes spread over several servers.

Run as ``python replica_worker.py CLIENT ROUNDS POOL URL [URL...]``. Round ``j``
talks to server ``(CLIENT + j) % len(URLS)``; every third round goes through a
branch (create it on one server, load onto it, merge it into main through the
next server, delete it), the others load into ``main`` directly. Each load
carries keys no other client or round uses. What the server acknowledged is
printed as one JSON document on stdout: the commit ids that must be in main's
history and the keys that must be in main. Any error ends the process non-zero
(with the traceback on stderr): a replica test expects none.
"""

from __future__ import annotations

import json
import sys

import pyarrow as pa

from limno import Lake
from limno.api.remote import RemoteLake

ROWS = 5


def keys_of(client: int, round_: int) -> list[int]:
    """The keys of one load: unique to the client and the round."""
    base = client * 1_000_000 + round_ * 100
    return list(range(base, base + ROWS))


def run(client: int, rounds: int, pool_name: str, urls: list[str]) -> dict[str, list[object]]:
    lakes = [Lake.open(u) for u in urls]
    commits: list[str] = []
    keys: list[int] = []
    try:
        pools = [lake.pool(pool_name) for lake in lakes]
        for j in range(rounds):
            here = pools[(client + j) % len(pools)]
            there = pools[(client + j + 1) % len(pools)]
            got = keys_of(client, j)
            table = pa.table({"k": got, "v": [f"c{client}-r{j}"] * len(got)})
            if j % 3 == 2:
                name = f"c{client}-r{j}"
                here.branch(name, "main")
                loaded = here.load([table], branch=name, message=name)
                merged = there.merge(name, "main", fast_forward=False, message=f"merge {name}")
                assert merged.kind == "merge", merged
                there.delete_branch(name)
                commits += [loaded.id, merged.commit]
            else:
                commits.append(here.load([table], message=f"c{client} r{j}").id)
            keys += got
    finally:
        for lake in lakes:
            assert isinstance(lake, RemoteLake)
            lake.close()
    return {"commits": list(commits), "keys": list(keys)}


def main() -> None:
    client, rounds, pool_name, *urls = sys.argv[1:]
    print(json.dumps(run(int(client), int(rounds), pool_name, urls)))


if __name__ == "__main__":
    main()
