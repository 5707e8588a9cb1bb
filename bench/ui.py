"""``ui_record_pages``: how fast the web UI's pages answer on a big record pool.

The lake is the issue's: a record pool of 100,000 objects committed over 10,000
commits (quick: 10,000 over 1,000), made by :func:`prepare`. Its first commit is an
ordinary load of real rows (keys 0..999, what the data preview shows); the others
add 10 objects each, written as the pool's commits are (the snapshot's ranges and
metarange through ``Versioned.snapshots``, one commit object each) but without
Parquet files (no page opens them: the preview's first page is the real rows) and
with the branch moved once at the end (``reset``) instead of once per commit. Object
ids are KSUIDs of increasing times, as objects made over a year would be.

A real ``limno serve`` (auth on, as deployed) serves it; a client signed in to the UI
(its session cookie) GETs each page, once to warm up, then ``repeat`` (at least 5)
times in turn; the figure ``<page>_p50`` is each page's p50 in ms: the pools list, the
pool page (branches and the first page of history), a page of history 100 pages back,
a commit page, the data preview, the operations page of the pool. Then, for each page,
a new ``limno serve`` on the same lake: ``<page>_cold`` is the page's first fetch there
(after a sign-in; a new process: nothing decoded or planned yet, but the snapshot's
sidecars, stored by the first server's first reader, are there: see
``pools/records/snapshot_index.py``).
``new_commit_<page>`` is, for the commit page, the data preview and the operations
page each, the first fetch from the first server (warm) of the page right after a
commit of 10 objects landed (:func:`land`): the first reader of a new snapshot,
which derives its sidecars from its parent's.
``first_read`` is the first server's first fetch of a page that reads the head's
snapshot (the commit page), which plans the snapshot and stores its sidecars: what
the first reader of a new big snapshot pays, once per snapshot and lake. No peer has
a web UI: the figures stand alone (the issue's target: under 300 ms).

``python -m bench.ui prepare PATH [OBJECTS COMMITS]`` makes such a lake (the UI's
scale test makes a smaller one that way, in a process of its own).
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
import sys
import time
from functools import partial
from typing import Any

from bench.data import rows_table
from bench.harness import Config, Result, median, timed

#: the pool :func:`prepare` makes
POOL = "big"
#: rows of the real first commit (keys 0 .. REAL_ROWS - 1)
REAL_ROWS = 1000
#: the pages measured: figure name -> path (``{commit}``, ``{older}``: filled in)
PAGES = {
    "pools": "/pools",
    "pool": f"/pools/{POOL}",
    "history_page_100": f"/pools/{POOL}?page={{older}}",
    "commit": f"/pools/{POOL}/commits/{{commit}}",
    "data": f"/pools/{POOL}/data",
    "operations": f"/operations?pool={POOL}",
}


def prepare(root: str, objects: int = 100_000, commits: int = 10_000) -> None:
    """A lake at ``root`` with pool ``big`` (key ``k``): ``objects`` objects over
    ``commits`` commits (see the module docstring)."""
    from limno.lake import Lake

    pool = Lake.init(root).create_pool(POOL, key="k")
    pool.load([rows_table(REAL_ROWS)], message="real rows")
    versioned = pool.versioned
    head = versioned.head("main")
    per = max(1, objects // max(1, commits - 1))
    start = time.time() - commits * per  # one object a second, ending now
    made = 0
    for n in range(1, commits):
        count = min(per, objects - made) if n < commits - 1 else objects - made
        head = _commit(versioned, head, start + made, REAL_ROWS + 1000 * made, count, n)
        made += count
    versioned.reset("main", head)


def land(root: str, n: int, count: int = 10) -> str:
    """One more commit of ``count`` objects (keys past every other's) on ``root``'s pool,
    as :func:`prepare` makes them, main moved to it: a new snapshot of the big pool,
    whose parent's sidecars are stored. Its id."""
    from limno.lake import Lake

    versioned = Lake.open(root).pool(POOL).versioned
    head = _commit(versioned, versioned.head("main"), time.time(), 10**9 * (n + 1), count, n)
    versioned.reset("main", head)
    return head


def _commit(versioned: Any, head: str, at: float, key: int, count: int, n: int) -> str:
    """Commit ``count`` objects (metadata only) on commit ``head``: keys from ``key`` on,
    1,000 an object, made a second apart from ``at``; the new commit's id."""
    from limno.core.commits import Action, Commit, now_iso
    from limno.data.objects import DataObject, schema_to_b64
    from limno.ksuid import ksuid

    schema = schema_to_b64(rows_table(1).schema)
    actions = []
    for i in range(count):
        obj = DataObject(
            id=ksuid(at + i),
            rows=1000,
            size=50_000,
            min_key=(key + 1000 * i,),
            max_key=(key + 1000 * i + 999,),
            schema_b64=schema,
            key_types=("int64",),
            created=dt.datetime.fromtimestamp(at + i, dt.UTC).isoformat(),
        )
        actions.append(Action("add", obj.id, obj.to_json()))
    parent = versioned.commits.get(head)
    snapshot = versioned.snapshots.apply(parent.snapshot, {a.key: dict(a.value) for a in actions})
    commit = Commit(
        id=ksuid(),
        parents=(head,),
        snapshot=snapshot,
        author="loader",
        date=now_iso(),
        message=f"batch {n}",
        meta={"batch": n},
        actions=tuple(actions),
    )
    versioned.commits.put(commit)
    return str(commit.id)


def ui_record_pages(cfg: Config) -> list[Result]:
    """p50 of each page of :data:`PAGES` on a prepared lake (see the module docstring)."""
    from bench.server import serving

    objects, commits = (10_000, 1_000) if cfg.quick else (100_000, 10_000)
    root = cfg.workdir / "ui"
    shutil.rmtree(root, ignore_errors=True)
    try:
        start = time.perf_counter()
        prepare(str(root), objects, commits)
        built = time.perf_counter() - start
        with serving(str(root)) as running:
            paths, first, times = _measure(running.url, running.env, max(cfg.repeat, 5))
            fresh = _new_commits(str(root), running.url, running.env)
        cold = {}
        for name, path in paths.items():  # each page the first of a new process
            with serving(str(root)) as running:
                cold[name] = _cold(running.url, running.env, path)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    note = f"{objects:,} objects, {commits:,} commits (built in {built:.0f} s)"
    out = [
        Result("ui_record_pages", f"{name}_p50", "ms", median(ts) * 1000, {}, False, note)
        for name, ts in times.items()
    ]
    out += [
        Result("ui_record_pages", f"{name}_cold", "ms", t * 1000, {}, False, "new process")
        for name, t in cold.items()
    ]
    note = "a commit just landed: the page's first fetch (the snapshot's first reader)"
    out += [
        Result("ui_record_pages", f"new_commit_{name}", "ms", t * 1000, {}, False, note)
        for name, t in fresh.items()
    ]
    note = "the first server's first commit page: plans the snapshot, stores its sidecars"
    return [*out, Result("ui_record_pages", "first_read", "ms", first * 1000, {}, False, note)]


def _new_commits(root: str, url: str, env: dict[str, str]) -> dict[str, float]:
    """For each page that reads the head's snapshot (the commit page, the data preview,
    the operations page), a commit landed, then the page's first fetch from the
    running server (warm): the first reader of a new snapshot, whose parent's sidecars
    are stored."""
    import httpx

    out = {}
    with httpx.Client(base_url=url, timeout=300) as client:
        sign_in(client, env)
        for n, name in enumerate(["commit", "data", "operations"]):
            commit = land(root, n)
            path = PAGES[name].format(commit=commit, older=commit)
            out[name] = timed(partial(_get, client, path), False)
    return out


def _measure(
    url: str, env: dict[str, str], reps: int
) -> tuple[dict[str, str], float, dict[str, list[float]]]:
    """The pages' paths, the first fetch of the commit page, and each page's times."""
    import httpx

    with httpx.Client(base_url=url, timeout=300) as client:
        sign_in(client, env)
        paths = page_paths(client)
        times: dict[str, list[float]] = {name: [] for name in paths}
        first = timed(partial(_get, client, paths["commit"]), False)
        for path in paths.values():  # warm up: every page once
            _get(client, path)
        for _ in range(reps):
            for name, path in paths.items():
                times[name].append(timed(partial(_get, client, path), False))
    return paths, first, times


def _cold(url: str, env: dict[str, str], path: str) -> float:
    """The first fetch of ``path`` from a server that has served only a sign-in."""
    import httpx

    with httpx.Client(base_url=url, timeout=300) as client:
        sign_in(client, env)
        return timed(partial(_get, client, path), False)


def sign_in(client: object, env: dict[str, str]) -> None:
    """Sign ``client`` (an httpx.Client on the server) in to the UI with ``env``'s key."""
    import httpx

    assert isinstance(client, httpx.Client)
    token = csrf_of(client.get("/login").text)
    answer = client.post(
        "/login",
        data={
            "csrf": token,
            "access_key_id": env["LIMNO_ACCESS_KEY_ID"],
            "secret": env["LIMNO_SECRET_ACCESS_KEY"],
            "next": "/pools",
        },
        follow_redirects=False,
    )
    if answer.status_code != 303:
        raise RuntimeError(f"sign-in refused: {answer.status_code} {answer.text[:200]}")


def page_paths(client: object) -> dict[str, str]:
    """:data:`PAGES` with a commit id (the head's) and a history page 100 pages back
    filled in, found through the pages themselves."""
    import httpx

    assert isinstance(client, httpx.Client)
    pool = _get(client, PAGES["pool"])
    commit = re.search(rf'href="/pools/{POOL}/commits/([0-9A-Za-z]+)"', pool)
    if commit is None:
        raise RuntimeError("no commit link on the pool page")
    older = commit.group(1)
    for _ in range(100):  # follow "older" links: what a person paging back would do
        page = _get(client, f"/pools/{POOL}?page={older}")
        found = re.search(r'page=([0-9A-Za-z]+)" rel="next"', page)
        if found is None:
            break
        older = found.group(1)
    return {name: p.format(commit=commit.group(1), older=older) for name, p in PAGES.items()}


def _get(client: object, path: str) -> str:
    import httpx

    assert isinstance(client, httpx.Client)
    answer = client.get(path)
    if answer.status_code != 200:
        raise RuntimeError(f"GET {path}: {answer.status_code} {answer.text[:300]}")
    return answer.text


def csrf_of(html: str) -> str:
    """The CSRF token a UI page carries (``<body data-csrf=...>``)."""
    found = re.search(r'data-csrf="([^"]*)"', html)
    if found is None:
        raise RuntimeError("no CSRF token on the sign-in page")
    return found.group(1)


def main(argv: list[str]) -> None:
    if len(argv) >= 2 and argv[0] == "prepare":
        sizes = [int(a) for a in argv[2:4]]
        prepare(argv[1], *sizes)
        return
    raise SystemExit("usage: python -m bench.ui prepare PATH [OBJECTS COMMITS]")


if __name__ == "__main__":
    main(sys.argv[1:])
