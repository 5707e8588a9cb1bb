"""The lake's event feed (limno.pools.events): what each change tells, and resuming.

The feed reads the lake's journals, so every test drives a real lake through the
Python API (or, for another process, through the CLI) and reads what the feed
says. Resuming is checked against a model: after any event id, exactly the events
not yet told, also when the lake changed meanwhile.
"""

from __future__ import annotations

import collections
import contextlib
import json
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno import Lake
from limno.api.local import LocalLake
from limno.errors import InvalidInputError, NotFoundError
from limno.pools.events import NOW, Event
from limno.pools.jobs import JobRecord, JobTracker

WAIT = 60.0  # seconds: the bound of every wait for a followed event


def rows(*keys: int) -> pa.Table:
    return pa.table({"ts": list(keys), "msg": [f"m{k}" for k in keys]})


def history(lake: Lake, after: str | None = None, pool: str | None = None) -> list[Event]:
    return list(lake.events(pool, after, follow=False))


def types(events: list[Event]) -> list[str]:
    return [e.type for e in events]


@pytest.fixture
def lake(tmp_path: Path) -> LocalLake:
    opened = Lake.init(str(tmp_path / "lake"))
    assert isinstance(opened, LocalLake)
    return opened


def test_every_kind_of_change_is_told_with_its_fields(lake: LocalLake) -> None:
    pool = lake.create_pool("logs", key="ts", author="ann")
    first = pool.load([rows(1, 2)], message="first", author="ann")
    pool.branch("dev")
    pool.tag("v1")
    second = pool.load([rows(3)], branch="dev", message="second", author="bob")
    pool.merge("dev", "main")  # a fast-forward: no new commit
    pool.load([rows(4)], message="third", author="ann")
    pool.load([rows(5)], branch="dev", message="fourth", author="bob")
    merged = pool.merge("dev", "main", message="merge dev")  # a merge commit
    pool.delete_branch("dev")
    pool.delete_tag("v1")
    with JobTracker(lake.storage, pool.id).track(JobRecord("job1", "compaction")) as job:
        job.rows_in, job.rows_out = 3, 2
    lake.rename_pool("logs", "events")

    events = history(lake)
    assert types(events) == [
        "pool.created",
        "pool.renamed",
        "branch.created",
        "commit",
        "branch.moved",
        "branch.created",
        "tag.created",
        "commit",
        "branch.moved",
        "branch.moved",
        "commit",
        "branch.moved",
        "commit",
        "branch.moved",
        "commit",
        "branch.moved",
        "branch.deleted",
        "tag.deleted",
        "job.created",
        "job.started",
        "job.finished",
    ]
    assert {e.pool_id for e in events} == {pool.id}
    assert events[0].pool == "logs"  # the name it was created with
    assert {e.pool for e in events[1:]} == {"events"}  # the name the pool has now
    assert len({e.id for e in events}) == len(events)
    created, renamed, main, commit, moved = events[:5]
    assert created.data == {"kind": "records", "key": "ts"}
    assert renamed.data == {"old_name": "logs"}
    root = main.data["commit"]
    assert main.data == {"branch": "main", "commit": root}
    assert commit.data["commit"] == first.id
    assert commit.data["parents"] == [root]
    assert (commit.data["author"], commit.data["message"]) == ("ann", "first")
    assert commit.data["actions"] == {"add": 1}
    assert commit.data["rows"] == {"added": 2, "deleted": 0}
    assert commit.data["merge"] is False
    assert moved.data == {"branch": "main", "old": root, "new": first.id}
    assert events[5].data == {"branch": "dev", "commit": first.id}
    assert events[6].data == {"tag": "v1", "commit": first.id}
    assert (events[7].data["branch"], events[7].data["author"]) == ("dev", "bob")
    fast_forward = events[9].data
    assert fast_forward == {"branch": "main", "old": first.id, "new": second.id}
    merge = events[14].data
    assert (merge["commit"], merge["merge"], merge["message"]) == (
        merged.commit,
        True,
        "merge dev",
    )
    assert events[16].data == {"branch": "dev", "commit": merge["parents"][1]}
    assert events[17].data == {"tag": "v1", "commit": first.id}
    finished = events[20].data
    assert (finished["job"], finished["kind"], finished["state"]) == (
        "job1",
        "compaction",
        "finished",
    )
    assert (finished["rows_in"], finished["rows_out"]) == (3, 2)
    for e in events:
        assert json.loads(json.dumps(e.to_json())) == e.to_json()
        assert Event.from_json(e.to_json()) == e
        assert e.time.startswith("20") and e.summary()


def test_a_dropped_pool_is_told_and_its_name_can_come_back(lake: Lake) -> None:
    old = lake.create_pool("logs")
    start = history(lake)[-1].id
    lake.drop_pool("logs")
    new = lake.create_pool("logs")
    told = history(lake, start)
    assert [(e.type, e.pool_id) for e in told] == [
        ("pool.dropped", old.id),
        ("pool.created", new.id),
        ("branch.created", new.id),
    ]
    assert told[0].pool == "logs"


def test_resuming_after_each_id_tells_exactly_the_rest(lake: Lake) -> None:
    for name in ("a", "b"):
        pool = lake.create_pool(name)
        pool.load([rows(1)])
        pool.branch("dev")
    events = history(lake)
    assert len(events) == 10
    for i, event in enumerate(events):
        assert history(lake, event.id) == events[i + 1 :], i
    assert history(lake, NOW) == []


def test_a_position_inside_a_journal_entry_resumes_inside_it(lake: Lake) -> None:
    """A commit and its branch move are one entry: resuming between them tells the move."""
    pool = lake.create_pool("logs")
    pool.load([rows(1)])
    events = history(lake)
    assert types(events[-2:]) == ["commit", "branch.moved"]
    assert types(history(lake, events[-2].id)) == ["branch.moved"]
    assert len(events[-2].id) < 16  # a cursor, not a list of everything told


@pytest.mark.parametrize("bad", ["x", "AQ", "AQIAAAAAAA", "////", ""])
def test_an_id_the_lake_did_not_give_out_is_refused(lake: Lake, bad: str) -> None:
    lake.create_pool("logs")
    with pytest.raises(InvalidInputError, match="invalid event id"):
        history(lake, bad)


def test_the_pool_filter_follows_the_pool_and_its_name(lake: Lake) -> None:
    a = lake.create_pool("a")
    b = lake.create_pool("b")
    b.load([rows(1)])
    a.load([rows(2)])
    lake.rename_pool("a", "c")
    told = history(lake, pool="a")
    assert {e.pool_id for e in told} == {a.id}
    assert types(told) == [
        "pool.created",
        "pool.renamed",
        "branch.created",
        "commit",
        "branch.moved",
    ]
    assert {e.pool_id for e in history(lake, pool=b.id)} == {b.id}
    assert history(lake, pool="nosuch") == []  # never had that name
    with pytest.raises(NotFoundError, match="nosuch"):
        history(lake, NOW, pool="nosuch")  # waiting for it would wait for ever
    assert history(lake, NOW, pool="c") == []


def test_a_follow_tells_pools_created_while_it_runs(lake: Lake) -> None:
    stop = threading.Event()
    with following(lake, NOW, stop) as box:
        pool = lake.create_pool("late")
        pool.load([rows(1)], message="late commit")
        got = take(box, 4)
    assert types(got) == ["pool.created", "branch.created", "commit", "branch.moved"]
    assert got[2].data["message"] == "late commit"
    assert history(lake, got[-1].id) == []


def test_a_commit_by_another_process_shows_up_in_a_follow_here(lake: Lake, tmp_path: Path) -> None:
    pool = lake.create_pool("logs")
    data = tmp_path / "rows.ndjson"
    data.write_text('{"ts": 1, "msg": "a"}\n{"ts": 2, "msg": "b"}\n{"ts": 3, "msg": "c"}\n')
    stop = threading.Event()
    with following(lake, NOW, stop, pool="logs") as box:
        args = [
            "--lake",
            lake.uri,
            "load",
            "-p",
            "logs",
            "-m",
            "elsewhere",
            "--author",
            "spark-job",
        ]
        proc = subprocess.run(
            [sys.executable, "-m", "limno", *args, str(data)],
            capture_output=True,
            text=True,
            timeout=WAIT,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        commit, moved = take(box, 2)
    assert (commit.type, commit.pool, commit.pool_id) == ("commit", "logs", pool.id)
    assert (commit.data["author"], commit.data["message"]) == ("spark-job", "elsewhere")
    assert commit.data["rows"] == {"added": 3, "deleted": 0}
    assert moved.type == "branch.moved"
    assert moved.data["new"] == commit.data["commit"] == pool.resolve("main")


@contextlib.contextmanager
def following(
    lake: Lake, after: str | None, stop: threading.Event, pool: str | None = None
) -> Iterator[queue.Queue[Event]]:
    """Follow the lake in a thread (its position fixed before this yields); events land
    in the queue. The thread ends when the block does."""
    events = lake.events(pool, after, stop=stop, poll_interval=0.02)
    box: queue.Queue[Event] = queue.Queue()

    def run() -> None:
        for event in events:
            box.put(event)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield box
    finally:
        stop.set()
        thread.join(WAIT)
        assert not thread.is_alive(), "the follow did not end once stopped"


def take(box: queue.Queue[Event], n: int) -> list[Event]:
    """The next ``n`` followed events, each within the bound."""
    out = []
    for _ in range(n):
        try:
            out.append(box.get(timeout=WAIT))
        except queue.Empty:
            raise AssertionError(f"only {len(out)} of {n} events within {WAIT}s") from None
    return out


# -- a model: resuming after any id, while the lake changes --------------------------------

NAMES = ("p", "q", "r")
Op = tuple[str, str, str]
ops = st.tuples(
    st.sampled_from(["create", "create", "drop", "rename", "commit", "branch", "unbranch", "tag"]),
    st.sampled_from(NAMES),
    st.sampled_from(NAMES),
)


class Model:
    """What each pool's journals should tell: (pool events, ref events) by pool id."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}  # name -> pool id
        self.pool_events: dict[str, list[str]] = collections.defaultdict(list)
        self.ref_events: dict[str, list[str]] = collections.defaultdict(list)
        self.dropped: set[str] = set()

    def apply(self, lake: Lake, op: Op, serial: int) -> None:
        kind, name, other = op
        pid = self.names.get(name)
        if kind == "create" and pid is None:
            pid = lake.create_pool(name).id
            self.names[name] = pid
            self.pool_events[pid].append("pool.created")
            self.ref_events[pid].append("branch.created")
        elif pid is None:
            return
        elif kind == "drop":
            lake.drop_pool(name)
            del self.names[name]
            self.pool_events[pid].append("pool.dropped")
            self.dropped.add(pid)
        elif kind == "rename" and other not in self.names:
            lake.rename_pool(name, other)
            self.names[other] = self.names.pop(name)
            self.pool_events[pid].append("pool.renamed")
        elif kind == "commit":
            lake.pool(name).load([rows(serial)])
            self.ref_events[pid] += ["commit", "branch.moved"]
        elif kind == "branch" or kind == "unbranch":
            pool = lake.pool(name)
            has = f"b{other}" in pool.branches()
            if kind == "branch" and not has:
                pool.branch(f"b{other}")
                self.ref_events[pid].append("branch.created")
            elif kind == "unbranch" and has:
                pool.delete_branch(f"b{other}")
                self.ref_events[pid].append("branch.deleted")
        elif kind == "tag":
            pool = lake.pool(name)
            if f"t{serial}" not in pool.tags():
                pool.tag(f"t{serial}")
                self.ref_events[pid].append("tag.created")

    def check(self, events: list[Event]) -> None:
        """The events of a read from the start, journal by journal, in order."""
        pools: dict[str, list[str]] = collections.defaultdict(list)
        refs: dict[str, list[str]] = collections.defaultdict(list)
        for e in events:
            assert e.pool_id is not None
            (pools if e.type.startswith("pool.") else refs)[e.pool_id].append(e.type)
        assert pools == {k: v for k, v in self.pool_events.items() if v}
        live = {k: v for k, v in self.ref_events.items() if k not in self.dropped}
        assert refs == live  # a dropped pool's journals are gone with it


def told(events: list[Event]) -> collections.Counter[str]:
    """Events as what they say (their ids depend on the reading order)."""
    return collections.Counter(
        json.dumps([e.type, e.pool_id, e.time, e.data], sort_keys=True) for e in events
    )


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    before=st.lists(ops, max_size=10),
    after=st.lists(ops.filter(lambda op: op[0] != "drop"), max_size=8),
    cut=st.integers(min_value=0, max_value=200),
)
def test_resuming_tells_each_event_once_whatever_happened_since(
    before: list[Op], after: list[Op], cut: int
) -> None:
    with tempfile.TemporaryDirectory() as where:
        lake = Lake.init(str(Path(where) / "lake"))
        model = Model()
        for i, op in enumerate([("create", "p", "p"), *before]):
            model.apply(lake, op, i)
        first = history(lake)
        model.check(first)
        for i, event in enumerate(first):
            assert history(lake, event.id) == first[i + 1 :]
        resume = first[cut % len(first)].id if first else None
        for i, op in enumerate(after, start=len(before) + 1):
            model.apply(lake, op, i)
        whole = history(lake)
        model.check(whole)
        rest = history(lake, resume)
        seen = first[: cut % len(first) + 1] if first else []
        # without drops after the cut, nothing told before is lost from the journals
        assert told(seen) + told(rest) == told(whole)
        assert history(lake, rest[-1].id if rest else resume) == []
