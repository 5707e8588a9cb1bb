"""Stateful property test: any sequence of puts, removes, commits, discards, branches and
merges leaves a file pool that lists like a reference model.

The model keeps, per branch, the committed map (path -> version) and the staged map
(path -> version, or None for a staged delete), and every commit's committed map by
commit id. A version is the blob id a put returned: unique per put, as an entry is (two
puts of the same bytes are two changes, which a merge must see as different). Merges take
the real merge base (the base algorithm has its own model test) and predict the result
path by path: the conflicts, what each strategy keeps, fast-forwards. Every listing,
with a random prefix, delimiter and page size, paged to the end, must equal the model's.
"""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from limno.errors import ConflictError, InvalidInputError
from limno.lake import Lake
from limno.pools.files.pool import FilePool

Files = dict[str, str]
ALPHABET = "ab/ é"
paths = st.text(ALPHABET, min_size=1, max_size=4)
prefixes = st.text(ALPHABET, max_size=2)
BRANCHES = ("main", "b1", "b2")


def _view(committed: Files, staged: dict[str, str | None]) -> Files:
    out = dict(committed)
    for path, version in staged.items():
        if version is None:
            out.pop(path, None)
        else:
            out[path] = version
    return out


def _listing(view: Files, prefix: str, delimiter: str | None) -> list[str]:
    """Every entry (as ``path=version``) and common prefix a full listing returns."""
    items: dict[str, str] = {}
    for path in sorted(view):
        if not path.startswith(prefix):
            continue
        cut = path.find(delimiter, len(prefix)) if delimiter else -1
        if cut >= 0:
            items.setdefault(path[: cut + len(delimiter or "")], "prefix")
        else:
            items[path] = f"{path}={view[path]}"
    return [items[k] if items[k] != "prefix" else k for k in sorted(items)]


class FilePoolMachine(RuleBasedStateMachine):
    pool: FilePool

    @initialize()
    def start(self) -> None:
        lake = Lake.init(f"memory://{uuid.uuid4().hex}")
        self.pool = lake.create_pool("m", kind="files")
        self.committed: dict[str, Files] = {"main": {}}
        self.staged: dict[str, dict[str, str | None]] = {"main": {}}
        self.snapshots: dict[str, Files] = {self.pool.resolve("main"): {}}

    def _branch(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from(sorted(self.committed)))

    @rule(data=st.data(), path=paths)
    def put(self, data: st.DataObject, path: str) -> None:
        branch = self._branch(data)
        entry = self.pool.put(branch, path, path.encode())
        assert entry.object is not None
        self.staged[branch][path] = entry.object

    @rule(data=st.data(), chosen=st.lists(paths, max_size=3))
    def remove(self, data: st.DataObject, chosen: list[str]) -> None:
        branch = self._branch(data)
        view = _view(self.committed[branch], self.staged[branch])
        expected = [p for p in dict.fromkeys(chosen) if p in view]
        assert self.pool.remove(branch, chosen) == expected
        for path in expected:
            if path in self.committed[branch]:
                self.staged[branch][path] = None
            else:
                del self.staged[branch][path]

    @rule(data=st.data(), prefix=st.none() | prefixes)
    def commit(self, data: st.DataObject, prefix: str | None) -> None:
        branch = self._branch(data)
        staged = self.staged[branch]
        chosen = {p: v for p, v in staged.items() if p.startswith(prefix or "")}
        if not chosen:
            try:
                self.pool.commit(branch, prefix=prefix)
            except InvalidInputError:
                return
            raise AssertionError("a commit of nothing staged landed")
        commit = self.pool.commit(branch, prefix=prefix)
        self.committed[branch] = _view(self.committed[branch], chosen)
        for path in chosen:
            del staged[path]
        self.snapshots[commit.id] = dict(self.committed[branch])

    @rule(data=st.data(), prefix=prefixes)
    def discard(self, data: st.DataObject, prefix: str) -> None:
        branch = self._branch(data)
        chosen = [p for p in self.staged[branch] if p.startswith(prefix)]
        assert self.pool.discard(branch, prefix) == len(chosen)
        for path in chosen:
            del self.staged[branch][path]

    @precondition(lambda self: len(self.committed) < len(BRANCHES))
    @rule(data=st.data())
    def branch(self, data: st.DataObject) -> None:
        source = self._branch(data)
        name = next(b for b in BRANCHES if b not in self.committed)
        self.pool.branch(name, source)
        self.committed[name] = dict(self.committed[source])
        self.staged[name] = {}

    @precondition(lambda self: len(self.committed) > 1)
    @rule(data=st.data(), strategy=st.sampled_from(["fail", "source-wins", "dest-wins"]))
    def merge(self, data: st.DataObject, strategy: str) -> None:
        source = self._branch(data)
        into = data.draw(st.sampled_from(sorted(b for b in self.committed if b != source)))
        src, head = self.pool.resolve(source), self.pool.resolve(into)
        base = self.pool.versioned.merge_base(src, head)
        assert base is not None
        old, theirs, ours = self.snapshots[base], self.snapshots[src], self.snapshots[head]
        result = dict(ours)
        conflicts = []
        for path in sorted(set(old) | set(theirs) | set(ours)):
            b, s, d = old.get(path), theirs.get(path), ours.get(path)
            if s in (b, d):
                continue
            if d != b and strategy != "source-wins":
                conflicts.append(path)
                continue
            if s is None:
                result.pop(path, None)
            else:
                result[path] = s
        if conflicts and strategy == "fail":
            try:
                self.pool.merge(source, into, strategy=strategy)
            except ConflictError as e:
                assert all(repr(p)[1:-1] in str(e) or p in str(e) for p in conflicts), str(e)
                return
            raise AssertionError(f"merge with conflicts {conflicts} landed")
        self.pool.merge(source, into, strategy=strategy)
        self.committed[into] = result
        self.snapshots[self.pool.resolve(into)] = dict(result)
        staged = self.staged[into]
        for path in [p for p, v in staged.items() if v is None and p not in result]:
            del staged[path]  # a staged delete of a path the merge removed: nothing left to do

    @rule(
        data=st.data(),
        prefix=prefixes,
        delimiter=st.sampled_from([None, "/", "b"]),
        limit=st.integers(1, 4),
        committed=st.booleans(),
    )
    def list_pages(
        self, data: st.DataObject, prefix: str, delimiter: str | None, limit: int, committed: bool
    ) -> None:
        branch = self._branch(data)
        if committed:
            ref = self.pool.resolve(branch)
            view = self.committed[branch]
        else:
            ref = branch
            view = _view(self.committed[branch], self.staged[branch])
        got: list[str] = []
        after = ""
        for _ in range(100):
            page = self.pool.list(ref, prefix, delimiter, after, limit)
            assert len(page.entries) + len(page.prefixes) <= limit
            items = [f"{e.path}={e.object}" for e in page.entries] + page.prefixes
            got += sorted(items, key=lambda i: i.split("=")[0] if "=" in i else i)
            if not page.truncated:
                break
            assert page.next_after is not None
            after = page.next_after
        assert got == _listing(view, prefix, delimiter)

    @invariant()
    def staged_changes_match(self) -> None:
        if not hasattr(self, "pool"):
            return
        for branch, staged in self.staged.items():
            changes = {
                c.path: c.new.object if c.new else None for c in self.pool.uncommitted(branch)
            }
            assert changes == staged


FilePoolMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestFilePoolModel = FilePoolMachine.TestCase
