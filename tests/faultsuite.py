"""The walk behind ``tests/pools/test_faults_*``: every storage call of an operation, faulted.

An operation (a :class:`Scenario`) runs once on a fresh lake through a recording
:class:`~limno.storage._faults.FaultyStorage` to count its storage calls N. Then,
for each k in 1..N and each fault (fail, crash-before, crash-after), the same
fresh lake runs the operation with ``Rule("any", k, fault)``. The operation must
succeed or raise what the fault explains (a ``LimnoError`` for a failure, ``Crash``
for a crash); anything else is a bug. Then the lake is reopened on a clean store,
as after a restart (a crashed writer's leases are deleted: its process is gone),
and :func:`check_after_fault` asserts what the lake promises:

- ``verify --deep`` is clean;
- every ref and staging area is exactly as before the operation or exactly as
  after it (all or nothing), so everything committed before is still readable;
- a vacuum removes nothing committed and reclaims whatever the faulted operation
  left: afterwards the data directory holds exactly the objects a ref, a staging
  area or retained history references, and no lease or vacuum run is left;
- after a failure, the same operation retried without faults succeeds and gives
  the after-state.

On S3 the faulted operation runs on the server and its lake is then downloaded
and checked locally (:meth:`Place.local_copy`).

"Fresh lake" means a copy of one template built per scenario, so each k starts
from byte-identical state (commit ids included) at the cost of a copy. Every cache
of limno's is per store, so each copy also starts with cold caches, as a new
process would.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa

from limno.api.local import LocalLake as Lake
from limno.errors import LimnoError
from limno.pools.records import splitting
from limno.pools.records.partitions import is_partition_key
from limno.pools.records.pool import RecordPool
from limno.pools.vacuum import VacuumReport
from limno.storage import Storage, open_storage
from limno.storage._faults import Crash, FaultyStorage, Rule

FAULTS = ("fail", "crash-before", "crash-after")
POOL = "p"
#: a call number no operation reaches: a rule that only counts
NEVER = 10**9

#: (kind, name) -> (head commit, sorted rows); kind is "branch", "tag" or "staged"
State = dict[tuple[str, str], tuple[str, tuple[tuple[Any, ...], ...]]]
Context = dict[str, Any]


def rows(keys: Sequence[int], tag: str = "v") -> pa.Table:
    return pa.table({"k": list(keys), "v": [f"{tag}{k}" for k in keys]})


@dataclass(frozen=True)
class Scenario:
    """An operation and the lake it runs on.

    ``prepare`` builds the before-state on a new pool and returns what ``act``
    needs (commit ids, file names); ``act`` is the operation walked.
    """

    name: str
    prepare: Callable[[RecordPool, Path], Context]
    act: Callable[[RecordPool, Context], object]
    pool_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class Template:
    """A scenario's prepared lake, and the states before and after its operation."""

    scenario: Scenario
    uri: str
    context: Context
    before: State
    after: State
    #: every storage call of the operation (what ``fail`` and ``crash-before`` count)
    calls: list[tuple[str, str]]
    #: how many of them succeeded (what ``crash-after`` counts)
    succeeded: int

    def known(self) -> set[str]:
        return {head for head, _ in self.before.values()}

    def n(self, fault: str) -> int:
        return self.succeeded if fault == "crash-after" else len(self.calls)


@dataclass(frozen=True)
class Outcome:
    k: int
    result: str  # "ok", "failed" or "crashed"


# -- lakes ----------------------------------------------------------------------------
class Place:
    """Where the lakes of the walks live: a local directory, or buckets on the S3
    server. It keeps each scenario's template, which the walks of its three faults
    share."""

    def __init__(self, root: Path, s3_uri: str | None = None) -> None:
        self.root = root
        self.s3_uri = s3_uri
        self._numbers = itertools.count(1)
        self._templates: dict[str, Template] = {}
        # one client, made here: making clients is not thread-safe, using one is
        self._s3: Any = boto3.client("s3") if s3_uri is not None else None

    def template(self, scenario: Scenario) -> Template:
        if scenario.name not in self._templates:
            self._templates[scenario.name] = template(self, scenario)
        return self._templates[scenario.name]

    def new_uri(self, name: str) -> str:
        """A new location; on S3 in a bucket of its own (moto lists a prefix by going
        through the whole bucket: a shared one would slow down as the walk goes)."""
        n = next(self._numbers)  # atomic under the GIL: walks may clone from threads
        if self.s3_uri is None:
            return str(self.root / f"{name}-{n}")
        bucket = f"{self.s3_uri.removeprefix('s3://').split('/')[0]}-{n}"
        self._s3.create_bucket(Bucket=bucket)
        return f"s3://{bucket}/{name}"

    def clone(self, src: str, name: str) -> str:
        """A byte-identical copy of the lake at ``src``."""
        dst = self.new_uri(name)
        if self.s3_uri is None:
            shutil.copytree(src, dst, symlinks=True)
            return dst
        bucket, _, src_prefix = src.removeprefix("s3://").partition("/")
        dst_bucket, _, dst_prefix = dst.removeprefix("s3://").partition("/")
        client = self._s3
        keys = [
            obj["Key"]
            for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=f"{src_prefix}/"
            )
            for obj in page.get("Contents", [])
        ]

        def copy(key: str) -> None:
            target = f"{dst_prefix}/{key[len(src_prefix) + 1 :]}"
            client.copy_object(
                Bucket=dst_bucket, Key=target, CopySource={"Bucket": bucket, "Key": key}
            )

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(copy, keys))
        return dst

    def local_copy(self, uri: str) -> str:
        """The lake at ``uri`` as a local directory: itself, or a byte-for-byte download
        of an S3 lake. The checks after a fault make hundreds of storage calls, each a
        round trip to the server on S3, where the time would go."""
        if self.s3_uri is None:
            return uri
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        local = self.root / f"{bucket}-{prefix.replace('/', '-')}"
        client = self._s3
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=f"{prefix}/"
        ):
            for obj in page.get("Contents", []):
                path = local / obj["Key"][len(prefix) + 1 :]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
        return str(local)

    def drop(self, local: str) -> None:
        """Remove a local lake that was checked (the walks make hundreds)."""
        shutil.rmtree(local)


def template(place: Place, scenario: Scenario) -> Template:
    """Build the scenario's lake, then run its operation once (on a copy), recording."""
    uri = place.new_uri(f"{scenario.name}-template")
    pool = Lake.init(uri).create_pool(POOL, key="k", **scenario.pool_options)
    context = scenario.prepare(pool, place.root)
    before = state(Lake(open_storage(uri)).pool(POOL))
    copy = place.clone(uri, f"{scenario.name}-recorded")
    store = FaultyStorage(open_storage(copy), threads=not_heartbeats)
    recorded = Lake(store).pool(POOL)
    store.rules = [Rule("any", NEVER, "crash-after")]
    store.calls.clear()
    result = scenario.act(recorded, context)
    after = state(Lake(open_storage(copy)).pool(POOL))
    if isinstance(result, VacuumReport):
        assert result.removed, f"{scenario.name}: the vacuum had nothing to remove"
    else:
        assert after != before, f"{scenario.name}: the operation changed nothing"
    succeeded = store.counts.get((0, "n"), 0)
    return Template(scenario, uri, context, before, after, list(store.calls), succeeded)


# -- what the lake holds --------------------------------------------------------------
def _sorted_rows(table: pa.Table) -> tuple[tuple[Any, ...], ...]:
    return tuple(sorted((tuple(r.values()) for r in table.to_pylist()), key=repr))


def state(pool: RecordPool) -> State:
    """Every ref's head and rows, and every staging area's rows."""
    out: State = {}
    for kind, refs in (("branch", pool.branches()), ("tag", pool.tags())):
        for name, head in refs.items():
            out[(kind, name)] = (head, _sorted_rows(pool.scan(name)))
    for name in pool.branches():
        staged = pool.staged(name)
        if staged:
            tables = [pool.read_object(o) for o in staged]
            out[("staged", name)] = ("", _sorted_rows(pa.concat_tables(tables)))
    return out


def comparable(got: State, known: set[str]) -> State:
    """``got`` with the heads the template does not know (the operation made them) as
    ``new``: their ids differ from one run to the next."""
    return {ref: (h if not h or h in known else "new", r) for ref, (h, r) in got.items()}


def data_keys(store: Storage, pool_id: str) -> set[str]:
    """The keys of everything under the pool's data prefix, hidden partial files too."""
    prefix = f"{pool_id}/data"
    keys = set()
    for info in [*store.walk(prefix), *store.list_partial(prefix)]:
        rel = info.path[len(prefix) :].lstrip("/")
        keys.add(rel.split("/", 1)[0].split(".", 1)[0].split("#", 1)[0])
    return keys


def referenced_keys(pool: RecordPool) -> set[str]:
    """Object keys that must be kept: the refs' snapshots, staging areas, and all
    reachable history unless the pool has a retention window (the scenarios' are zero,
    which keeps heads and tags only)."""
    v = pool.versioned
    heads = [*pool.branches().values(), *pool.tags().values()]
    commits = set(heads)
    if pool.retention() is None:
        commits = {c.id for c in v.commits.log(heads)}
    keys: set[str] = set().union(*(v.snapshot_keys(c) for c in commits))
    for branch in pool.branches():
        keys |= set(v.staged(branch))
    return {k for k in keys if not is_partition_key(k)}


def not_heartbeats(thread: str) -> bool:
    """Calls the walk counts: all but the lease keeper's renewals, which may come at
    any moment (every 20 s) and would shift which call is the Nth."""
    return thread != "limno-leases"


# -- the walk -------------------------------------------------------------------------
def faulted_outcome(act: Callable[[], object], fault: str, where: str) -> str:
    """Run ``act`` with a fault rule set: "ok", "failed" (a LimnoError: only a ``fail``
    may cause one) or "crashed" (:class:`Crash`: only a crash may)."""
    try:
        act()
    except LimnoError as e:
        assert fault == "fail", f"{where}: raised {e!r}"
        return "failed"
    except Crash:
        assert fault != "fail", f"{where}: crashed"
        return "crashed"
    return "ok"


def run_faulted(place: Place, t: Template, k: int, fault: str) -> tuple[str, str]:
    """Run the operation on a fresh copy with ``fault`` at its k-th storage call; the
    copy's URI and how the operation ended."""
    uri = place.clone(t.uri, f"{t.scenario.name}-{fault}-{k}")
    store = FaultyStorage(open_storage(uri), threads=not_heartbeats)
    pool = Lake(store).pool(POOL)
    store.rules = [Rule("any", k, fault)]
    try:
        t.scenario.act(pool, t.context)
    except LimnoError as e:
        assert fault == "fail", f"{t.scenario.name}: {fault} at call {k} raised {e!r}"
        return uri, "failed"
    except Crash:
        assert fault != "fail", f"{t.scenario.name}: {fault} at call {k} crashed"
        return uri, "crashed"
    # a run may make fewer calls than the recorded one (a new object's id decides how
    # its snapshot is cut into ranges), but a crash at a call it made ends it
    reached = store.counts.get((0, "n"), 0) >= k
    assert fault == "fail" or not reached, f"{t.scenario.name}: survived {fault} at call {k}"
    return uri, "ok"


def restart(uri: str, crashed: bool) -> Lake:
    """The lake opened again on a clean store. A crashed writer's leases are dropped:
    its process is gone, which is what a vacuum after a real restart would see."""
    store = open_storage(uri)
    lake = Lake(store)
    if crashed:
        pool_id = lake.pool(POOL).id
        for info in list(store.walk(f"{pool_id}/leases")):
            store.delete(info.path)
    return lake


def _faults(lake: Lake) -> list[str]:
    return [str(f) for f in lake.verify(deep=True)]


def check_after_fault(t: Template, uri: str, k: int, fault: str, result: str) -> None:
    """The promises of the module docstring, for one faulted run."""
    call = t.calls[k - 1] if fault != "crash-after" else "a successful call"
    where = f"{t.scenario.name}: {fault} at call {k} {call} ({result}, in {uri})"
    lake = restart(uri, result == "crashed")
    assert _faults(lake) == [], f"{where}: verify: {_faults(lake)}"
    pool = lake.pool(POOL)
    known = t.known()
    got = comparable(state(pool), known)
    before, after = comparable(t.before, known), comparable(t.after, known)
    assert got in (before, after), f"{where}: neither before nor after:\n{got}"
    assert result != "ok" or got == after, f"{where}: it succeeded but gave\n{got}"
    pool.vacuum(grace=dt.timedelta(0))
    assert _faults(lake) == [], f"{where}: verify after vacuum: {_faults(lake)}"
    assert comparable(state(pool), known) == got, f"{where}: vacuum changed what refs hold"
    stored, needed = data_keys(lake.storage, pool.id), referenced_keys(pool)
    assert stored == needed, (
        f"{where}: after vacuum, unreferenced {sorted(stored - needed)},"
        f" missing {sorted(needed - stored)}"
    )
    assert not list(lake.storage.walk(f"{pool.id}/leases")), f"{where}: a lease is left"
    assert not pool.versioned.gc.state().runs, f"{where}: a vacuum run is still registered"
    if result == "failed":
        t.scenario.act(pool, t.context)
        again = comparable(state(pool), known)
        assert again == after, f"{where}: the retry gave\n{again}"


def steps(n: int, sample: bool) -> list[int]:
    """1..n, or every third k plus the last three when ``sample``."""
    if not sample:
        return list(range(1, n + 1))
    return sorted({*range(1, n + 1, 3), *range(max(1, n - 2), n + 1)})


def walk(
    place: Place, scenario: Scenario, fault: str, sample: bool = False, threads: int = 1
) -> list[Outcome]:
    """The walk of one scenario with one kind of fault, each outcome checked.

    ``threads`` > 1 runs several k at once (each on its own copy): for S3, where the
    time goes to waiting on the server.
    """
    t = place.template(scenario)
    assert t.n(fault) > 0

    def one(k: int) -> Outcome:
        uri, result = run_faulted(place, t, k, fault)
        local = place.local_copy(uri)
        check_after_fault(t, local, k, fault, result)
        place.drop(local)
        return Outcome(k, result)

    ks = steps(t.n(fault), sample)
    if threads == 1:
        outcomes = [one(k) for k in ks]
    else:
        with ThreadPoolExecutor(threads) as pool:
            outcomes = list(pool.map(one, ks))
    assert sum(o.result != "ok" for o in outcomes) >= len(outcomes) // 2, outcomes
    return outcomes


# -- the scenarios --------------------------------------------------------------------
def _base(pool: RecordPool, root: Path) -> Context:
    pool.load([rows([1, 2, 3, 4])])
    return {}


def _ndjson(pool: RecordPool, root: Path) -> Context:
    _base(pool, root)
    path = root / "load-5-7.ndjson"
    path.write_text("".join(json.dumps({"k": k, "v": f"n{k}"}) + "\n" for k in (5, 6, 7)))
    return {"file": str(path)}


def _staged(pool: RecordPool, root: Path) -> Context:
    _base(pool, root)
    pool.add([rows([5, 6])])
    return {}


def _two_objects(pool: RecordPool, root: Path) -> Context:
    _base(pool, root)
    pool.load([rows([3, 5, 7], "w")])
    return {}


def _loaded(pool: RecordPool, root: Path) -> Context:
    _base(pool, root)
    return {"commit": pool.load([rows([5, 6])]).id}


def _dev(pool: RecordPool, root: Path) -> Context:
    _base(pool, root)
    pool.branch("dev")
    pool.load([rows([7, 8])], branch="dev")
    return {}


def _diverged(pool: RecordPool, root: Path) -> Context:
    _dev(pool, root)
    pool.load([rows([9])])
    return {}


def _overlapping(pool: RecordPool, root: Path) -> Context:
    _base(pool, root)
    for keys in ([1, 3, 5], [2, 4, 6], [3, 4, 5, 6]):
        pool.load([rows(keys, "c")])
    return {}


def _past_threshold(pool: RecordPool, root: Path) -> Context:
    pool.load([rows(range(0, 20, 2))])
    pool.load([rows(range(1, 20, 2))])
    objects, tree = pool.snapshot()
    (leaf, _), *_ = splitting.split_candidates(pool, tree, objects, pool.split_threshold)
    return {"leaf": leaf.id}


def _dropped_branch(pool: RecordPool, root: Path) -> Context:
    _dev(pool, root)
    pool.delete_branch("dev")
    return {}


def _history(pool: RecordPool, root: Path) -> Context:
    _base(pool, root)
    pool.load([rows([5, 6])])
    pool.delete_where("k = 5")
    pool.branch("dev")
    pool.load([rows([7])], branch="dev")
    pool.delete_branch("dev")
    return {}


def _vacuum(pool: RecordPool, context: Context) -> object:
    return pool.vacuum(grace=dt.timedelta(0))


SCENARIOS = {
    s.name: s
    for s in [
        Scenario("load-ndjson", _ndjson, lambda p, c: p.load([c["file"]])),
        Scenario("load-arrow", _base, lambda p, c: p.load([rows([5, 6, 7])])),
        Scenario("add", _base, lambda p, c: p.add([rows([5, 6])])),
        Scenario("commit", _staged, lambda p, c: p.commit()),
        Scenario("delete-where", _two_objects, lambda p, c: p.delete_where("k >= 3 AND k <= 5")),
        Scenario("revert", _loaded, lambda p, c: p.revert(c["commit"])),
        Scenario("branch", _base, lambda p, c: p.branch("dev")),
        Scenario("tag", _base, lambda p, c: p.tag("v1")),
        Scenario("merge-ff", _dev, lambda p, c: p.merge("dev")),
        Scenario("merge-commit", _diverged, lambda p, c: p.merge("dev")),
        Scenario("compact", _overlapping, lambda p, c: p.compact()),
        Scenario("split", _past_threshold, lambda p, c: p.split(c["leaf"]), {"split_threshold": 4}),
        Scenario("vacuum-dropped-branch", _dropped_branch, _vacuum),
        Scenario("vacuum-retention", _history, _vacuum, {"retention": {"*": dt.timedelta(0)}}),
    ]
}
