"""Merge requests (pull requests): a proposal to merge a source ref into a branch, kept in
the lake with its outcome.

A merge request lives in its pool's review store, a journal map at
``<pool-id>/reviews/`` (the lake's own primitive, as branches are: :mod:`limno.journal`)
keyed ``mr:<id>``; ids are KSUIDs, so they sort by creation time. Opening one is a
put-if-absent of its key; every later change (a merge attempt, a close) is a journal
append whose new value is computed from the value it follows, re-computed when another
writer's append lands first, so concurrent updates never lose one.

Merging one is the pool's ordinary merge (the chosen strategy; a protected destination
accepts it, as it accepts any merge) between two appends. The first *claims* the request
(``open`` and unclaimed -> claimed by this merge); of two merges of one request exactly
one claim lands, and the other is refused with a ConflictError naming who is merging.
The second records the outcome and drops the claim: ``merged`` with the commit, or, when
the merge failed (a conflict, a pre-merge hook's veto), still ``open`` with the attempt
and its hooks' verdicts kept. A claim left by a process that died mid-merge expires
after :data:`CLAIM_TTL` (longer than any hook may run) and another merge may take it
over; the merger that held it, should it wake up, cannot land any more: the append
that moves the branch checks a fence naming the current claim
(:mod:`limno.pools.review_claims`), and recording its outcome fails too. Claims (and
closes) are compare-and-swaps of the request as read. The merge itself is idempotent:
a second merge of a source already merged finds the destination up to date.

What a merge would meet, before anyone merges, is :func:`compare`
(:mod:`limno.pools.review_compare`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limno.core.commits import now_iso
from limno.core.hooks import HOOK_TIMEOUT, HookVerdict, recording
from limno.errors import (
    AlreadyExistsError,
    ConflictError,
    HookVetoError,
    InvalidInputError,
    LimnoError,
    NotFoundError,
    PreconditionFailedError,
)
from limno.journal import AssertAbsent, AssertEquals, JournalStore, Put, Requirement, StoreState
from limno.journal._journal import backoff
from limno.ksuid import is_ksuid, ksuid
from limno.pools.review_claims import (
    ClaimFence,
    drop_fence,
    fence_from,
    fence_of,
    raise_fence,
)
from limno.storage import Storage

if TYPE_CHECKING:
    from limno.core.versioning import MergeResult, Versioned
    from limno.faults import Fault
    from limno.pools.registry import PoolConfig, PoolRegistry
    from limno.pools.review_compare import Comparison

__all__ = [
    "CLAIM_TTL",
    "STATES",
    "MergeAttempt",
    "MergeRequest",
    "ReviewStore",
    "Reviews",
    "verify_reviews",
]

#: a merge request's states
STATES = ("open", "merged", "closed")
#: how long a merge's claim holds a request (then another merge may take it over): more
#: than a pre-merge and a post-merge hook may run
CLAIM_TTL = dt.timedelta(seconds=2 * HOOK_TIMEOUT + 300)
MAX_TITLE = 256
MAX_DESCRIPTION = 64 * 1024
_KEY = "mr:"
#: compare-and-swaps of one request tried before giving up (each lost to another change)
MAX_SWAPS = 50


def _verdicts(items: Any) -> tuple[HookVerdict, ...]:
    return tuple(HookVerdict.from_json(v) for v in items or ())


@dataclass(frozen=True)
class MergeAttempt:
    """One try at merging a request: when, by whom, with which strategy, and how it went
    (``merged``, ``up-to-date``, ``conflict``, ``vetoed`` or ``failed``: ``message`` says
    why), the commit it made, and the verdict of each hook that ran."""

    at: str
    by: str
    strategy: str
    outcome: str
    message: str = ""
    commit: str | None = None
    verdicts: tuple[HookVerdict, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["verdicts"] = [v.to_json() for v in self.verdicts]
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MergeAttempt:
        return cls(
            at=str(d["at"]),
            by=str(d["by"]),
            strategy=str(d["strategy"]),
            outcome=str(d["outcome"]),
            message=str(d.get("message") or ""),
            commit=d.get("commit"),
            verdicts=_verdicts(d.get("verdicts")),
        )


@dataclass(frozen=True)
class MergeRequest:
    """A merge request: ``source`` (a ref, usually a branch) into branch ``into``.

    ``state`` is ``open``, ``merged`` or ``closed``; ``done_at``/``done_by`` say when and
    by whom it was merged or closed; ``strategy`` and ``commit`` are the merge's (the
    commit the destination moved to). ``verdicts`` are the hooks' verdicts of the last
    merge attempt, ``attempts`` every attempt, oldest first; ``claim`` is the merge in
    progress (``{"token", "by", "since"}``), if any.
    """

    id: str
    pool: str
    title: str
    source: str
    into: str
    author: str
    created: str
    description: str = ""
    state: str = "open"
    strategy: str | None = None
    commit: str | None = None
    done_at: str | None = None
    done_by: str | None = None
    verdicts: tuple[HookVerdict, ...] = ()
    attempts: tuple[MergeAttempt, ...] = ()
    claim: Mapping[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["verdicts"] = [v.to_json() for v in self.verdicts]
        out["attempts"] = [a.to_json() for a in self.attempts]
        out["claim"] = None if self.claim is None else dict(self.claim)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MergeRequest:
        def text(k: str) -> str | None:
            return None if d.get(k) is None else str(d[k])

        return cls(
            id=str(d["id"]),
            pool=str(d["pool"]),
            title=str(d["title"]),
            source=str(d["source"]),
            into=str(d["into"]),
            author=str(d["author"]),
            created=str(d["created"]),
            description=str(d.get("description") or ""),
            state=str(d.get("state") or "open"),
            strategy=text("strategy"),
            commit=text("commit"),
            done_at=text("done_at"),
            done_by=text("done_by"),
            verdicts=_verdicts(d.get("verdicts")),
            attempts=tuple(MergeAttempt.from_json(a) for a in d.get("attempts") or ()),
            claim=None if d.get("claim") is None else dict(d["claim"]),
        )


def _stale(claim: Mapping[str, str], now: dt.datetime) -> bool:
    return now - dt.datetime.fromisoformat(claim["since"]) > CLAIM_TTL


class ReviewStore:
    """The merge requests of one pool (``name``: the pool's name, for messages and the
    requests' ``pool`` field; renames keep the store, which is by id)."""

    def __init__(self, storage: Storage, pool_id: str, name: str) -> None:
        self.journal = JournalStore(storage, f"{pool_id}/reviews")
        self.name = name

    def _ensure(self) -> None:
        """Create the journal on the first request (of two creators one wins; fine)."""
        if not self.journal.exists():
            with contextlib.suppress(AlreadyExistsError):
                self.journal.create()

    def _decode(self, value: Mapping[str, Any]) -> MergeRequest:
        return dataclasses.replace(MergeRequest.from_json(value), pool=self.name)

    def all(self) -> list[MergeRequest]:
        """Every merge request, newest first."""
        if not self.journal.exists():
            return []
        items = self.journal.state().items
        return [self._decode(items[k]) for k in sorted(items, reverse=True) if k.startswith(_KEY)]

    def _find(self, items: Mapping[str, Any], mr_id: str) -> MergeRequest:
        value = items.get(_KEY + mr_id)
        if value is None:
            raise NotFoundError(f"pool {self.name!r} has no merge request {mr_id!r}")
        return self._decode(value)

    def get(self, mr_id: str) -> MergeRequest:
        if not self.journal.exists():
            return self._find({}, mr_id)
        return self._find(self.journal.state().items, mr_id)

    def discard(self) -> None:
        """Delete the whole journal (of a pool dropped while it was written)."""
        for info in self.journal.journal.storage.walk(self.journal.journal.prefix + "/"):
            self.journal.journal.storage.delete(info.path)

    def add(self, mr: MergeRequest) -> MergeRequest:
        self._ensure()
        key = _KEY + mr.id
        self.journal.commit([Put(key, mr.to_json())], [AssertAbsent(key)])
        return mr

    def update(self, mr_id: str, change: Callable[[MergeRequest], MergeRequest]) -> MergeRequest:
        """Apply ``change`` to the request as it is when the append lands (recomputed
        after a lost race); ``change`` raises a LimnoError to refuse."""
        done: list[MergeRequest] = []

        def updates(state: StoreState) -> list[Put]:
            new = change(self._find(state.items, mr_id))
            done[:] = [new]
            return [Put(_KEY + mr_id, new.to_json())]

        self.get(mr_id)  # NotFoundError before any append
        self.journal.commit(updates)
        return done[0]

    def swap(
        self,
        mr_id: str,
        change: Callable[[MergeRequest], MergeRequest],
        before: Callable[[MergeRequest], bool],
    ) -> MergeRequest:
        """Compare-and-swap: ``change`` of the request as read here, appended only if the
        request is still that (else read it again: another change landed first).
        ``before(read)`` runs between the read and the append (it writes a claim's
        fence) and returns False to start over."""
        self.get(mr_id)
        key = _KEY + mr_id
        for attempt in range(MAX_SWAPS):
            seen = self.journal.state().items[key]
            new = change(self._decode(seen))
            if before(self._decode(seen)):
                with contextlib.suppress(PreconditionFailedError):
                    self.journal.commit([Put(key, new.to_json())], [AssertEquals(key, seen)])
                    return new
            backoff(attempt)
        raise ConflictError(f"merge request {mr_id}: gave up after {MAX_SWAPS} concurrent changes")


def verify_reviews(storage: Storage, pool_id: str) -> Iterator[Fault]:
    """``limno verify`` of a pool's merge requests: the journal's faults, and entries that
    are not merge requests."""
    from limno.faults import Fault  # verify only

    store = ReviewStore(storage, pool_id, pool_id)
    if not store.journal.exists():
        return
    faults = list(store.journal.verify())
    yield from faults
    if faults:
        return
    for key, value in store.journal.state().items.items():
        try:
            MergeRequest.from_json(value)
        except (KeyError, TypeError, ValueError) as e:
            yield Fault(f"{pool_id}/reviews", f"{key}: not a merge request ({e!s:.100})")


def _open_only(mr: MergeRequest, doing: str) -> None:
    if mr.state != "open":
        how = f" as {mr.commit}" if mr.state == "merged" else ""
        raise ConflictError(
            f"cannot {doing} merge request {mr.id}: it was {mr.state}{how}"
            f" by {mr.done_by} at {mr.done_at}"
        )


def _outcome(error: LimnoError) -> str:
    if isinstance(error, HookVetoError):
        return "vetoed"
    return "conflict" if isinstance(error, ConflictError) else "failed"


class Reviews:
    """Mixin of the pools of both kinds: their merge requests (see the module doc)."""

    versioned: Versioned
    config: PoolConfig
    registry: PoolRegistry

    if TYPE_CHECKING:  # the pool's own (Branching.merge)

        def merge(
            self,
            source: str,
            into: str = "main",
            strategy: str = "fail",
            message: str = "",
            author: str | None = None,
            meta: Mapping[str, Any] | None = None,
            fast_forward: bool = True,
            fence: Requirement | None = None,
        ) -> MergeResult: ...

    @property
    def _reviews(self) -> ReviewStore:
        return ReviewStore(self.versioned.storage, self.config.id, self.config.name)

    def open_merge_request(
        self,
        source: str,
        into: str = "main",
        title: str = "",
        description: str = "",
        author: str | None = None,
    ) -> MergeRequest:
        """Propose merging ref ``source`` into branch ``into``; the new request."""
        from limno.core.versioning import default_author

        title = title.strip()
        if not title or len(title) > MAX_TITLE:
            raise InvalidInputError(f"a merge request needs a title (at most {MAX_TITLE} chars)")
        if len(description) > MAX_DESCRIPTION:
            raise InvalidInputError(f"description too long (at most {MAX_DESCRIPTION} bytes)")
        if source == into:
            raise InvalidInputError(f"a merge request needs two refs, not {into!r} twice")
        self.versioned.head(into)  # NotFoundError: the destination is a branch
        self.versioned.resolve(source)  # and the source a ref
        mr = MergeRequest(
            id=ksuid(),
            pool=self.config.name,
            title=title,
            source=source,
            into=into,
            author=author or default_author(),
            created=now_iso(),
            description=description,
        )
        with self._undropped():
            return self._reviews.add(mr)

    @contextlib.contextmanager
    def _undropped(self) -> Iterator[None]:
        """Around a write to the review journal: once it is done, the pool must still be
        registered. Dropping a pool deletes everything under ``<pool-id>/`` after
        unregistering it, so a write that landed before the drop was deleted with it;
        one that landed after (a pool object opened before the drop) is deleted here,
        and refused: no ``reviews/`` of a dropped pool stays behind."""
        yield
        if self.config.id not in self.registry.journal.state().items:
            self._reviews.discard()
            raise NotFoundError(f"pool {self.config.name!r} not found (it was dropped)")

    def merge_requests(self, state: str | None = None) -> list[MergeRequest]:
        """The pool's merge requests, newest first; only those in ``state`` if given
        (``open``, ``merged``, ``closed``; ``all`` or None: every one)."""
        if state not in (None, "all", *STATES):
            raise InvalidInputError(f"unknown state {state!r} (one of {', '.join(STATES)}, all)")
        found = self._reviews.all()
        return found if state in (None, "all") else [m for m in found if m.state == state]

    def merge_request(self, mr_id: str) -> MergeRequest:
        """One merge request by id (NotFoundError if the pool has none of that id)."""
        if not is_ksuid(mr_id):
            raise NotFoundError(f"pool {self.config.name!r} has no merge request {mr_id!r}")
        return self._reviews.get(mr_id)

    def close_merge_request(self, mr_id: str, author: str | None = None) -> MergeRequest:
        """Close an open request without merging (ConflictError if it is not open, or
        being merged)."""
        from limno.core.versioning import default_author

        by = author or default_author()
        closer, refs = ksuid(), self.versioned.refs.journal

        def fence(mr: MergeRequest) -> bool:  # a stale claim's merger must not land after
            return mr.claim is None or raise_fence(refs, mr_id, closer)

        def close(mr: MergeRequest) -> MergeRequest:
            _open_only(mr, "close")
            if mr.claim is not None and not _stale(mr.claim, dt.datetime.now(dt.UTC)):
                raise ConflictError(
                    f"cannot close merge request {mr.id}: {mr.claim['by']} is merging it"
                )
            return dataclasses.replace(
                mr, state="closed", done_at=now_iso(), done_by=by, claim=None
            )

        self.merge_request(mr_id)
        try:
            with self._undropped():
                return self._reviews.swap(mr_id, close, fence)
        finally:
            drop_fence(refs, mr_id, closer)

    def merge_merge_request(
        self, mr_id: str, strategy: str = "fail", author: str | None = None
    ) -> MergeRequest:
        """Merge an open request with ``strategy`` (see :mod:`limno.core.merge`): the
        request, now ``merged``. A merge that fails (a conflict, a hook's veto) raises
        its error, the request stays open with the attempt recorded; a request being
        merged by someone else, or not open, is a ConflictError."""
        from limno.core import merge as merging
        from limno.core.versioning import default_author

        merging.plan_merge({}, {}, strategy)  # an unknown strategy: refused before the claim
        by = author or default_author()
        token = ksuid()
        store, refs = self._reviews, self.versioned.refs.journal

        def claim(mr: MergeRequest) -> MergeRequest:
            _open_only(mr, "merge")
            now = dt.datetime.now(dt.UTC)
            if mr.claim is not None and not _stale(mr.claim, now):
                raise ConflictError(
                    f"merge request {mr.id} is being merged by {mr.claim['by']}"
                    f" (since {mr.claim['since']})"
                )
            return dataclasses.replace(
                mr, claim={"token": token, "by": by, "since": now.isoformat()}
            )

        seen: list[dict[str, Any] | None] = [None]

        def read_fence(_: MergeRequest) -> bool:  # read before the claim, written after it
            seen[0] = fence_of(refs, mr_id)
            return True

        mr = self.merge_request(mr_id)
        store.swap(mr_id, claim, read_fence)
        attempt: MergeAttempt | None = None
        try:
            if not fence_from(refs, mr_id, token, seen[0]):
                raise ConflictError(
                    f"merge request {mr.id}: taken over before this merge began: nothing landed"
                )
            with recording() as verdicts:
                try:
                    result = self.merge(
                        mr.source,
                        mr.into,
                        strategy,
                        message=f"merge request {mr.id}: {mr.title}",
                        author=by,
                        meta={"merge_request": mr.id},
                        fence=ClaimFence(mr.id, token),
                    )
                except LimnoError as e:
                    attempt = MergeAttempt(
                        now_iso(), by, strategy, _outcome(e), str(e), None, tuple(verdicts)
                    )
                    raise
            attempt = MergeAttempt(
                now_iso(),
                by,
                strategy,
                "merged" if result.kind != "up-to-date" else "up-to-date",
                result.kind,
                result.commit,
                tuple(verdicts),
            )
        finally:
            try:
                with self._undropped():
                    store.update(mr_id, _finish(token, attempt))
            finally:
                drop_fence(refs, mr_id, token)
        return store.get(mr_id)

    def compare(
        self, source: str, into: str = "main", rows: int = 10, limit: int = 1000
    ) -> Comparison:
        """What merging ref ``source`` into branch ``into`` would bring and meet (see
        :func:`limno.pools.review_compare.compare`), computed without writing."""
        from limno.pools.review_compare import compare

        return compare(self, source, into, rows, limit)


def _finish(token: str, attempt: MergeAttempt | None) -> Callable[[MergeRequest], MergeRequest]:
    """The update that ends a claimed merge: record ``attempt`` (None: the merge broke
    off without an outcome, e.g. interrupted) and drop the claim, if it is still ours."""

    def finish(mr: MergeRequest) -> MergeRequest:
        if mr.claim is None or mr.claim.get("token") != token:
            raise ConflictError(
                f"merge request {mr.id}: {'closed' if mr.state == 'closed' else 'taken over'}"
                " while this merge ran past the claim's lifetime: its outcome is not recorded"
            )
        if attempt is None:
            return dataclasses.replace(mr, claim=None)
        done = dataclasses.replace(
            mr, claim=None, verdicts=attempt.verdicts, attempts=(*mr.attempts, attempt)
        )
        if attempt.commit is None:
            return done
        return dataclasses.replace(
            done,
            state="merged",
            strategy=attempt.strategy,
            commit=attempt.commit,
            done_at=attempt.at,
            done_by=attempt.by,
        )

    return finish
