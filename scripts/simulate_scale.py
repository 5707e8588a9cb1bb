#!/usr/bin/env python3
"""How limno's commit protocol behaves on S3 with many writers, and what its metadata
costs at 1 PB / 1e9 objects: the numbers docs/architecture.md quotes.

Part one is a discrete-event simulation of writers running limno's write path request by
request, as the code does (``pool.load()`` on a warm process): read the branch journal
(HEAD hint, galloping probes, new entries), take a lease, upload the data object and its
key sketch, then ``Versioned.commit``: write the changed range and the metarange,
put-if-absent the commit object and the journal entry; a loser re-reads the journal,
rebases and backs off as ``journal._journal.backoff`` does. Every put is followed by the
HEAD ``ObStorage.put`` makes. The store has log-normal latencies and a token bucket per
partitioned prefix for reads and for writes; a request over the limit gets ``503
SlowDown`` and is retried as object_store does by default (waits drawn between 100 ms
and twice the previous one, capped at 15 s; 10 retries or 3 minutes).

Part two is arithmetic on limno's constants and on entry sizes measured on a real lake:
snapshot metadata at 1e9 objects, branch-journal length and opening cost, vacuum's
listing, and a Spark bulk import of 1 PB.

Deterministic for a seed; stdlib only. ``python scripts/simulate_scale.py`` prints
Markdown in about 10 s; ``--quick`` is a smaller run.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import math
import random
from collections import Counter
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field

# -- limno's constants (tests/core/test_simulate_scale.py checks them against the code) --------
BOUNDARY_MODULUS = 64  # core/committed.py: a range ends where a key hashes to 0 mod 64
MAX_RANGE = 512  # core/committed.py: ... or after 512 entries
MAX_COMMIT_ATTEMPTS = 200  # core/versioning.py: a commit gives up after 200 rebases
SNAPSHOT_EVERY = 100  # journal/_store.py: a snapshot of the folded map every 100 entries
RANGE_CACHE = 8192  # core/committed.py: decoded ranges kept per process
MULTIPART_CHUNK = 5 * 2**20  # obstore.put: part size of a multipart upload
MULTIPART_CONCURRENCY = 12  # obstore.put: parts in flight

# -- sizes measured on a lake made by limno (4 columns: int64 key, int64, float64, string) -
ENTRY_BYTES = 600  # one object's snapshot entry (577 B; the Arrow schema is most of it)
RANGE_REF_BYTES = 158  # one row of a metarange
JOURNAL_ENTRY_BYTES = 222  # one branch move
REF_BYTES = 60  # one branch or tag in a journal snapshot
ACTION_BYTES = 590  # one "add" action inside a commit object
SKETCH_BYTES = 2700  # a data object's KLL sketch sidecar

GiB, MiB = 2**30, 2**20
YEAR = 365 * 24 * 3600

Proc = Generator[float, None, None]


class Throttled(Exception):
    """A request still refused after every retry object_store allows."""


class GaveUp(Exception):
    """A commit rebased MAX_COMMIT_ATTEMPTS times without landing (ConflictError)."""


@dataclass(frozen=True)
class StoreModel:
    """The simulated object store. Latency medians are assumptions in the range AWS gives
    for small requests ("tens of milliseconds"); the limits are S3's per partitioned prefix."""

    get_ms: float = 20.0
    head_ms: float = 15.0
    put_ms: float = 30.0
    delete_ms: float = 20.0
    sigma: float = 0.5  # log-normal spread: p99 is about 3x the median
    stream_mb_s: float = 90.0  # one connection's transfer rate
    read_limit: float = 5500.0  # GET/HEAD per second per partition
    write_limit: float = 3500.0  # PUT/COPY/POST/DELETE per second per partition
    burst_s: float = 0.1  # a bucket holds this many seconds of its rate
    slowdown_ms: float = 10.0  # time to receive a 503
    retry_init_s: float = 0.1  # object_store BackoffConfig/RetryConfig defaults
    retry_max_s: float = 15.0
    retry_base: float = 2.0
    max_retries: int = 10
    retry_timeout_s: float = 180.0


READS = frozenset({"GET", "HEAD"})


class Bucket:
    """A token bucket: ``rate`` requests per second, bursts of ``cap``."""

    __slots__ = ("cap", "rate", "t", "tokens")

    def __init__(self, rate: float, cap: float) -> None:
        self.rate, self.cap, self.tokens, self.t = rate, cap, cap, 0.0

    def take(self, now: float) -> bool:
        if now > self.t:
            self.tokens = min(self.cap, self.tokens + (now - self.t) * self.rate)
            self.t = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class Sim:
    """The event loop, the store and its counters."""

    def __init__(
        self, model: StoreModel, rng: random.Random, partition: Callable[[str], str]
    ) -> None:
        self.model, self.rng, self.partition = model, rng, partition
        self.now = 0.0
        self._queue: list[tuple[float, int, Proc]] = []
        self._seq = 0
        self._buckets: dict[tuple[str, bool], Bucket] = {}
        self.throttled = 0
        self.requests: Counter[tuple[str, str]] = Counter()  # (area, op) -> served
        self.lean = False  # the what-if protocol: see simulate()

    def spawn(self, proc: Proc, at: float) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, proc))

    def run(self, until: float) -> None:
        while self._queue:
            at, _, proc = heapq.heappop(self._queue)
            if at > until:
                break
            self.now = at
            try:
                delay = next(proc)
            except StopIteration:
                continue
            self.spawn(proc, at + delay)

    def _bucket(self, path: str, read: bool) -> Bucket:
        key = (self.partition(path), read)
        bucket = self._buckets.get(key)
        if bucket is None:
            m = self.model
            rate = m.read_limit if read else m.write_limit
            bucket = self._buckets[key] = Bucket(rate, max(1.0, rate * m.burst_s))
        return bucket

    def _latency(self, op: str, nbytes: int) -> float:
        m = self.model
        ms = {"GET": m.get_ms, "HEAD": m.head_ms, "DELETE": m.delete_ms}.get(op, m.put_ms)
        transfer = nbytes / (m.stream_mb_s * 1e6)
        return ms / 1000 * math.exp(self.rng.gauss(0.0, m.sigma)) + transfer

    def _admit(self, path: str, op: str, at: float) -> tuple[float, bool]:
        """Seconds spent on 503s before ``op`` is admitted at ``at``, and whether it was
        (False: refused after every retry object_store allows)."""
        m, bucket = self.model, self._bucket(path, op in READS)
        waited, backoff, retries = 0.0, m.retry_init_s, 0
        while not bucket.take(at + waited):
            self.throttled += 1
            waited += m.slowdown_ms / 1000
            if retries >= m.max_retries or waited > m.retry_timeout_s:
                return waited, False
            waited += backoff
            backoff = min(m.retry_max_s, self.rng.uniform(m.retry_init_s, backoff * m.retry_base))
            retries += 1
        return waited, True

    def request(self, path: str, op: str, nbytes: int = 0) -> Proc:
        """One request; the caller resumes when its response has arrived."""
        waited, admitted = self._admit(path, op, self.now)
        if not admitted:
            yield waited
            raise Throttled(path)
        self.requests[path.split("/")[1], op] += 1
        yield waited + self._latency(op, nbytes)

    def parts(self, path: str, count: int, nbytes: int) -> Proc:
        """Multipart upload parts, MULTIPART_CONCURRENCY at a time."""
        for first in range(0, count, MULTIPART_CONCURRENCY):
            slowest, refused = 0.0, False
            for _ in range(min(MULTIPART_CONCURRENCY, count - first)):
                waited, admitted = self._admit(path, "PUT", self.now)
                refused = refused or not admitted
                if admitted:
                    self.requests[path.split("/")[1], "PUT"] += 1
                    waited += self._latency("PUT", nbytes)
                slowest = max(slowest, waited)
            yield slowest
            if refused:
                raise Throttled(path)


@dataclass
class Pool:
    """One pool's branch journal: ``log[n]`` is the branch entry ``n`` moved."""

    name: str
    log: list[int] = field(default_factory=lambda: [-1, 0])  # entry 1: branch main made
    hint: int = 1

    @property
    def head(self) -> int:
        return len(self.log) - 1


@dataclass
class Writer:
    """A long-running writer process and what its caches hold."""

    pool: Pool
    branch: int
    known: int = 1  # journal entries folded into its cached map
    branch_at: int = 1  # the entry that last moved its branch, as it has seen
    snap_at: int = 1  # the entry whose snapshot it has read
    busy: bool = False  # a load started and neither landed nor failed
    committing_since: float | None = None  # when its Versioned.commit began


@dataclass
class Tally:
    """What the writers of one run did."""

    attempted: int = 0
    landed: int = 0
    failed: int = 0
    latencies: list[float] = field(default_factory=list)
    retries: list[int] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)


def _put(sim: Sim, path: str, nbytes: int = 0, op: str = "PUT") -> Proc:
    """``ObStorage.put``/``put_if_absent``: the write, then a HEAD for its ObjectInfo."""
    yield from sim.request(path, op, nbytes)
    if not sim.lean:
        yield from sim.request(path, "HEAD")


def read_state(sim: Sim, w: Writer) -> Proc:
    """``JournalStore.state()``: HEAD hint, probes from it, then every new entry."""
    p, jp = w.pool, f"{w.pool.name}/branches"
    yield from sim.request(jp, "GET")
    hint, floor = p.hint, w.known
    if hint > floor:
        yield from sim.request(jp, "HEAD")
        floor = max(floor, min(hint, p.head))
    step, hi = 1, floor + 1
    while True:
        yield from sim.request(jp, "HEAD")
        if hi > p.head:
            break
        floor, step = hi, step * 2
        hi = floor + step
    while hi - floor > 1:
        mid = (floor + hi) // 2
        yield from sim.request(jp, "HEAD")
        floor, hi = (mid, hi) if mid <= p.head else (floor, mid)
    if floor != hint:  # a reader that finds the hint stale rewrites it
        yield from _put(sim, jp, 4)
        p.hint = floor
    for n in range(w.known + 1, floor + 1):
        yield from sim.request(jp, "GET", JOURNAL_ENTRY_BYTES)
        if p.log[n] == w.branch:
            w.branch_at = n
    w.known = max(w.known, floor)


def read_snapshot(sim: Sim, w: Writer, at: int) -> Proc:
    """Reading a parent another writer made: its commit, its metarange and the range it
    rewrote (appends of KSUID-named objects all land in the last range)."""
    if w.snap_at != at:
        yield from sim.request(f"{w.pool.name}/commits", "GET", 900)
        yield from sim.request(f"{w.pool.name}/meta", "GET", 4 * RANGE_REF_BYTES)
        yield from sim.request(f"{w.pool.name}/meta", "GET", 32 * ENTRY_BYTES)
        w.snap_at = at


def backoff(rng: random.Random, attempt: int) -> float:
    """``limno.journal._journal.backoff``: jittered, doubling, capped at 50 ms."""
    return rng.uniform(0, min(0.05, 0.001 * 2 ** min(attempt, 6)))


def load(sim: Sim, w: Writer, object_bytes: int, tally: Tally) -> Proc:
    """One ``pool.load()``: write one data object, then ``Versioned.commit``."""
    name, rng = w.pool.name, sim.rng
    yield from read_state(sim, w)  # versioned.head(branch)
    if not sim.lean:
        yield from read_state(sim, w)  # gc.ticket()
    yield from _put(sim, f"{name}/leases", 300)  # the write's lease
    if not sim.lean:
        yield from read_state(sim, w)  # write(): snapshot(branch) resolves the ref
    yield from read_snapshot(sim, w, w.branch_at)
    data = f"{name}/data"
    if object_bytes > MULTIPART_CHUNK:  # put_file: a multipart upload
        count = math.ceil(object_bytes / MULTIPART_CHUNK)
        yield from sim.request(data, "POST")
        yield from sim.parts(data, count, MULTIPART_CHUNK)
        yield from _put(sim, data, 0, "POST")
    else:
        yield from _put(sim, data, object_bytes)
    yield from _put(sim, data, SKETCH_BYTES)  # the key sketch sidecar
    started = w.committing_since = sim.now
    yield from read_state(sim, w)  # Versioned.commit: head(branch)
    expected, lost = w.branch_at, 0
    for attempt in range(MAX_COMMIT_ATTEMPTS):
        yield from read_snapshot(sim, w, expected)  # commits.get(head) and validate()
        for _ in range(2):  # snapshots.apply: the last range, then the metarange
            yield from sim.request(f"{name}/meta", "HEAD")
            yield from _put(sim, f"{name}/meta", 32 * ENTRY_BYTES)
        yield from _put(sim, f"{name}/commits", 900)  # commits.put (put-if-absent)
        yield from read_state(sim, w)  # gc.land: state(), requirements checked
        moved, retry = w.branch_at != expected, 0
        while not moved:  # JournalStore.commit
            if not (sim.lean and retry == 0):  # lean: the read gc.land just made
                yield from read_state(sim, w)
            if w.branch_at != expected:
                if not sim.lean:
                    yield from read_state(sim, w)  # gc.land re-reads, then re-raises
                break
            n = w.known + 1
            yield from sim.request(f"{name}/branches", "PUT", JOURNAL_ENTRY_BYTES)
            if w.pool.head == n - 1:  # put-if-absent of entry n won
                w.pool.log.append(w.branch)
                w.known = w.branch_at = w.snap_at = n
                yield from sim.request(f"{name}/branches", "HEAD")
                yield from _put(sim, f"{name}/branches", 4)  # the HEAD hint
                w.pool.hint = n
                if n % SNAPSHOT_EVERY == 0:
                    yield from _put(sim, f"{name}/branches", 4096)
                tally.landed += 1
                tally.latencies.append(sim.now - started)
                tally.retries.append(attempt)
                tally.lost.append(lost)
                return
            lost += 1
            yield backoff(rng, retry)
            retry += 1
        if not sim.lean:  # lean: the read that saw the move gave the new head
            yield from read_state(sim, w)  # the commit loop: head(branch) ...
        expected = w.branch_at
        yield backoff(rng, attempt)  # ... and backoff before the rebase
    raise GaveUp(name)


def writer_loop(
    sim: Sim, w: Writer, object_bytes: int, until: float, loads: int | None, tally: Tally
) -> Proc:
    """Load after load (a failed one is counted, then the next begins) until ``until``,
    or ``loads`` times."""
    done = 0
    while sim.now < until and (loads is None or done < loads):
        tally.attempted += 1
        done += 1
        w.busy = True
        try:
            yield from load(sim, w, object_bytes, tally)
        except (Throttled, GaveUp):
            tally.failed += 1
        w.busy, w.committing_since = False, None
        # the lease released (if refused, vacuum reaps it once it is dead)
        with contextlib.suppress(Throttled):
            yield from sim.request(f"{w.pool.name}/leases", "DELETE")


SCENARIOS = ("same branch", "separate branches", "separate pools", "separate pools, one partition")


@dataclass(frozen=True)
class Result:
    scenario: str
    writers: int
    seconds: float
    attempted: int
    landed: int
    failed: int
    unfinished: int
    p50: float
    p99: float
    retries_mean: float
    retries_max: int
    lost_mean: float
    longest_wait: float
    throttled: int
    requests: Counter[tuple[str, str]]

    @property
    def commits_per_s(self) -> float:
        return self.landed / self.seconds


def quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def simulate(
    scenario: str,
    writers: int,
    seconds: float = 20.0,
    seed: int = 1,
    object_bytes: int = 32 * MiB,
    model: StoreModel | None = None,
    loads: int | None = None,
    lean: bool = False,
) -> Result:
    """Run ``writers`` writers, each loading again and again for ``seconds`` (or, with
    ``loads``, that many times), starting within the first second.

    ``lean`` runs the protocol as it could be: one journal read where the code makes
    several in a row (the load's head, gc ticket and ref; gc.land's and the journal's;
    the re-read after a lost race) and no HEAD after a PUT."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}")
    rng = random.Random(f"{seed}:{scenario}:{writers}")
    one = scenario.endswith("one partition")
    # the partitioned prefix of a path: once S3 has split a busy bucket, one per pool and
    # area (``p3/branches``, ``p3/data``...); a new bucket starts as one partition
    sim = Sim(model or StoreModel(), rng, (lambda _: "bucket") if one else (lambda p: p))
    sim.lean = lean
    pools = [Pool(f"p{i}") for i in range(writers if "pools" in scenario else 1)]
    crew = [Writer(pools[i % len(pools)], 0) for i in range(writers)]
    if scenario == "separate branches":  # writer i's branch was made before the run
        for i, w in enumerate(crew[1:], start=1):
            w.pool.log.append(i)
            w.branch = i
            w.branch_at = w.snap_at = w.pool.head
    tally = Tally()
    for w in crew:
        w.known = w.pool.hint = w.pool.head
        sim.spawn(writer_loop(sim, w, object_bytes, seconds, loads, tally), rng.uniform(0, 1))
    sim.run(seconds)
    t, n = tally, max(1, tally.landed)
    waits = [seconds - w.committing_since for w in crew if w.committing_since is not None]
    counts = (t.attempted, t.landed, t.failed, sum(w.busy for w in crew))
    times = (quantile(t.latencies, 0.5), quantile(t.latencies, 0.99))
    retries = (sum(t.retries) / n, max(t.retries, default=0))
    lost = (sum(t.lost) / n, max(waits, default=0.0))
    stats = (*counts, *times, *retries, *lost, sim.throttled, sim.requests)
    return Result(scenario, writers, seconds, *stats)


# -- Markdown -------------------------------------------------------------------------


def cell(x: object) -> str:
    """A table cell: numbers thousands-separated, to about three significant digits."""
    if not isinstance(x, int | float) or math.isnan(x):
        return "-" if isinstance(x, float) else str(x)
    return f"{round(x):,}" if isinstance(x, int) or abs(x) >= 100 else f"{x:.3g}"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[cell(c) for c in r] for r in rows]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in cells]
    return "\n".join(lines)


def simulation_table(results: Sequence[Result]) -> str:
    headers = ["scenario", "writers", "commits", "commits/s", "commit p50 s", "commit p99 s"]
    headers += ["retries mean", "retries max", "lost appends mean", "failed", "unfinished"]
    headers += ["longest wait s", "503 SlowDown"]
    rows = [
        [r.scenario, r.writers, r.landed, r.commits_per_s, r.p50, r.p99, r.retries_mean]
        + [r.retries_max, r.lost_mean, r.failed, r.unfinished, r.longest_wait, r.throttled]
        for r in results
    ]
    return table(headers, rows)


#: S3 Express One Zone: single-digit millisecond requests, limits per directory bucket
EXPRESS = StoreModel(get_ms=4.0, head_ms=3.0, put_ms=6.0, delete_ms=4.0)
EXPRESS = StoreModel(**{**EXPRESS.__dict__, "read_limit": 200_000.0, "write_limit": 100_000.0})


def what_if_table(seconds: float, seed: int, object_bytes: int) -> str:
    """The protocol as is and lean (see :func:`simulate`), on S3 Standard and Express."""
    runs = [
        (f"{how}, {store}", model, how == "lean", scenario, n)
        for store, model in (("S3 Standard", StoreModel()), ("S3 Express", EXPRESS))
        for how in ("as is", "lean")
        for scenario, n in (("same branch", 10), ("same branch", 100))
    ]
    runs += [
        (f"{h}, S3 Standard", StoreModel(), h == "lean", SCENARIOS[3], 1000)
        for h in ("as is", "lean")
    ]
    rows: list[list[object]] = []
    for label, model, lean, scenario, n in runs:
        r = simulate(scenario, n, seconds, seed, object_bytes, model, lean=lean)
        per = sum(r.requests.values()) / max(1, r.landed)
        rows.append([label, scenario, n, r.commits_per_s, r.p50, r.p99, r.retries_mean])
        rows[-1] += [r.failed, r.throttled, per]
    headers = ["protocol, store", "scenario", "writers", "commits/s", "commit p50 s"]
    headers += [
        "commit p99 s",
        "retries mean",
        "failed",
        "503 SlowDown",
        "requests per landed commit",
    ]
    return table(headers, rows)


def requests_table(result: Result) -> str:
    """Requests per landed commit by area and operation (one uncontended writer)."""
    per = max(1, result.landed)
    areas = sorted({a for a, _ in result.requests})
    ops = ["GET", "HEAD", "PUT", "POST", "DELETE"]
    rows: list[list[object]] = []
    for area in areas:
        counts = [result.requests.get((area, op), 0) / per for op in ops]
        rows.append([area, *counts, sum(counts)])
    totals = [sum(result.requests.get((a, op), 0) for a in areas) / per for op in ops]
    rows.append(["all", *totals, sum(totals)])
    return table(["prefix", *ops, "total"], rows)


# -- part two: arithmetic ---------------------------------------------------------------


def entries_per_range() -> float:
    """Expected entries of a range: boundaries with probability 1/64, cut at 512."""
    p = 1 / BOUNDARY_MODULUS
    return (1 - (1 - p) ** MAX_RANGE) / p


def snapshot_table(model: StoreModel) -> str:
    per = entries_per_range()
    rows: list[list[object]] = []
    for objects, note in ((10**5, " (1e9 in 10,000 pools)"), (10**7, ""), (10**9, " (one pool)")):
        ranges = math.ceil(objects / per)
        meta = ranges * RANGE_REF_BYTES
        row = [f"{objects:,}{note}", ranges, per * ENTRY_BYTES / 1e3, meta / 1e6]
        row += [objects * ENTRY_BYTES / GiB, "yes" if ranges <= RANGE_CACHE else "no"]
        row += [(meta + per * ENTRY_BYTES) / 1e6, ranges * model.get_ms / 1000 / 60]
        rows.append([*row, math.ceil(ranges / 1000)])
    headers = ["objects per pool", "ranges", "range KB", "metarange MB"]
    headers += ["whole snapshot GiB", "fits the range cache"]
    headers += ["bytes rewritten per append commit (MB)"]
    headers += ["cold read of every range, one stream (min)", "metarange pages of 1,000"]
    return table(headers, rows)


def journal_table(model: StoreModel, refs: int = 100) -> str:
    rows: list[list[object]] = []
    open_gets = 1 + 2 + 1 + (SNAPSHOT_EVERY - 1) / 2  # hint, probes, snapshot, mean entries
    for rate in (0.1, 1.0, 3.0, 100.0):
        entries, snaps = rate * YEAR, rate * YEAR / SNAPSHOT_EVERY
        row = [rate, entries, entries * JOURNAL_ENTRY_BYTES / 1e9, snaps]
        row += [snaps * refs * REF_BYTES / 1e9, open_gets, open_gets * model.get_ms / 1000]
        rows.append([*row, entries * model.get_ms / 1000 / 3600])
    headers = ["ref moves/s per pool", "entries per year", "entries GB/yr", "snapshots/yr"]
    headers += [f"snapshot GB/yr ({refs} refs)", "GETs to open (mean)", "open s (sequential)"]
    headers += ["--as-of replay after 1 yr (h, sequential)"]
    return table(headers, rows)


def vacuum_table(model: StoreModel, list_ms: float = 80.0, objects_per_commit: int = 10) -> str:
    rows: list[list[object]] = []
    for objects, pools in ((10**5, 10_000), (10**7, 100), (10**9, 1)):
        keys = 2 * objects  # the Parquet object and its .sketch
        pages = math.ceil(keys / 1000)
        commits = objects // objects_per_commit
        removed = objects // 10
        row = [f"{objects:,} (x {pools:,} pool{'s' if pools > 1 else ''})", pages]
        row += [pages * list_ms / 1000 / 60, keys * 250 / GiB]
        row += [commits * model.get_ms / 1000 / 3600, removed * 4]
        rows.append([*row, removed * 4 * 25 / 1000 / 3600, pages * pools * list_ms / 1000 / 3600])
    headers = ["objects per pool", "LIST pages per pool", "listing min (one stream)"]
    headers += ["listing in memory GiB (~250 B/key)", "commit-log walk h (no retention)"]
    headers += ["requests to remove 10%", "removal h (one stream)", "whole lake, one stream h"]
    return table(headers, rows)


def spark_table(model: StoreModel, total: float = 1e15, size: int = 256 * MiB) -> str:
    objects = math.ceil(total / size)
    s3a_parts = math.ceil(size / (64 * MiB))  # fs.s3a.multipart.size default: 64M
    native = objects * (s3a_parts + 2 + 1 + 1 + 1)  # parts+init+complete, COPY, sketch, DELETE
    python = objects * (math.ceil(size / MULTIPART_CHUNK) + 2 + 1)  # obstore parts + sketch
    ranges = math.ceil(objects / entries_per_range())
    write_range = (2 * model.head_ms + model.put_ms) / 1000
    delete = model.delete_ms / 1000
    rows: list[list[object]] = [
        ["data objects (= key ranges = write tasks = describe tasks)", objects],
        ["input-read tasks at 1 GiB per input file", math.ceil(total / GiB)],
        ["S3 writes, native path (s3a 64 MiB parts, COPY, sketch, DELETE)", native],
        ["  hours at 3,500 writes/s into one data prefix", native / model.write_limit / 3600],
        ["S3 writes, Python writer (obstore 5 MiB parts)", python],
        ["  hours at 3,500 writes/s into one data prefix", python / model.write_limit / 3600],
        ["object metadata collected on the driver (GB)", objects * ENTRY_BYTES / 1e9],
        ["commit object, one commit (GB)", objects * ACTION_BYTES / 1e9],
        ["snapshot ranges written by the driver", ranges],
        ["  minutes, one stream (HEAD + PUT + HEAD each)", ranges * write_range / 60],
        ["metarange of the new snapshot (MB)", ranges * RANGE_REF_BYTES / 1e6],
        ["staging files deleted by the driver, one stream (h)", objects * delete / 3600],
    ]
    return table(["1 PB bulk import at 256 MiB objects", "value"], rows)


# -- the report ---------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=20.0, help="simulated seconds per run")
    parser.add_argument("--writers", default="1,10,100,1000", help="comma-separated counts")
    parser.add_argument("--object-mb", type=float, default=32.0, help="data object size (MiB)")
    parser.add_argument("--quick", action="store_true", help="5 simulated s, up to 100 writers")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.writers.split(",") if c.strip()]
    seconds = args.seconds
    if args.quick:
        counts, seconds = [c for c in counts if c <= 100], min(seconds, 5.0)
    model, object_bytes = StoreModel(), int(args.object_mb * MiB)
    results = [
        simulate(s, n, seconds, args.seed, object_bytes, model) for s in SCENARIOS for n in counts
    ]
    print(f"## Commits on an S3-like store ({seconds:g} simulated s per run, seed {args.seed})\n")
    print(simulation_table(results) + "\n")
    baseline = simulate(SCENARIOS[0], 1, 1e6, args.seed, object_bytes, model, loads=10)
    print("## S3 requests per commit (one writer, no contention)\n")
    print(requests_table(baseline) + "\n")
    print("## What if: one journal read per step, no HEAD after PUT, S3 Express\n")
    print(what_if_table(seconds, args.seed, object_bytes) + "\n")
    print("## Snapshot metadata at 1e9 objects\n")
    print(snapshot_table(model) + "\n")
    print("## Branch journal per year\n")
    print(journal_table(model) + "\n")
    print("## Vacuum of 1e9 objects (LIST pages of 1,000 keys, 80 ms each)\n")
    print(vacuum_table(model) + "\n")
    print("## Spark bulk import of 1 PB\n")
    print(spark_table(model))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
