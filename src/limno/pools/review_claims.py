"""Fencing a merge request's merge: a merger whose claim was taken over cannot land.

A claim (limno.pools.reviews) lives in the pool's review journal, but a merge lands in
another journal, the pool's branch store, so a claim alone cannot stop a merger that
stalled past :data:`~limno.pools.reviews.CLAIM_TTL` (a paused VM, a stopped process)
and woke up after another merger took the request over: both would move the branch.
The fence closes that gap. A claimant reads the request's *fence*, a key
``mr-fence:<id>`` in the branch store, just before its claim (a compare-and-swap of the
request as read, :meth:`~limno.pools.reviews.ReviewStore.swap`), and once the claim
landed points the fence at its claim's token, with a compare-and-swap from the value it
read; the append that moves the destination branch requires the fence to still name that
token (:class:`ClaimFence`), so it is checked in the same atomic append as the move.

Why exactly one merger can land: of two claimants racing from the same read only one
claim lands (the other is refused, naming who merges, and writes no fence). A takeover
of a stale claim reads the fence before its own claim: if the old claimant had already
fenced, the takeover's fence replaces it and the old merger's landing fails with a
ConflictError, changing nothing; if it had not, the old claimant's fence write (from the
value before its claim) and the takeover's (from the same value) race, one fails, and
that merger stops before merging. Closing a request whose stale claim it replaces fences
it the same way (before its close, which leaves no claim anyone could land with).

A finished merge removes its fence (if it is still its own); a merger that stalled
and lost leaves nothing behind but a key the next claim overwrites.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from limno.errors import ConflictError, NotFoundError, PreconditionFailedError
from limno.journal import AssertEquals, JournalStore, Put, Remove, Requirement

__all__ = ["FENCE", "ClaimFence", "drop_fence", "fence_from", "fence_of", "raise_fence"]

#: the branch-store key prefix of merge requests' fences
FENCE = "mr-fence:"


@dataclass(frozen=True)
class ClaimFence(Requirement):
    """The landing condition of a claimed merge: request ``mr_id``'s fence still names
    ``token`` (a ConflictError otherwise, which no commit loop retries)."""

    mr_id: str
    token: str

    def check(self, items: Mapping[str, dict[str, Any]]) -> None:
        found = items.get(FENCE + self.mr_id)
        if found is None or found.get("token") != self.token:
            raise ConflictError(
                f"merge request {self.mr_id}: this merge's claim was taken over (it ran"
                " past the claim's lifetime, or the request was closed): nothing landed"
            )


def fence_of(refs: JournalStore, mr_id: str) -> dict[str, Any] | None:
    """Request ``mr_id``'s fence as it is now (None: none)."""
    return refs.get(FENCE + mr_id)


def raise_fence(refs: JournalStore, mr_id: str, token: str) -> bool:
    """Point request ``mr_id``'s fence at ``token``, if nobody wrote it since it was read
    here; False when someone did (read the request again and retry)."""
    return fence_from(refs, mr_id, token, fence_of(refs, mr_id))


def fence_from(refs: JournalStore, mr_id: str, token: str, seen: dict[str, Any] | None) -> bool:
    """Point request ``mr_id``'s fence at ``token`` if it still is ``seen``; False when
    someone wrote it since."""
    key = FENCE + mr_id
    try:
        refs.commit([Put(key, {"token": token})], [AssertEquals(key, seen)])
    except PreconditionFailedError:
        return False
    return True


def drop_fence(refs: JournalStore, mr_id: str, token: str) -> None:
    """Remove request ``mr_id``'s fence if it still names ``token`` (else leave it)."""
    key = FENCE + mr_id
    ours = {"token": token}
    if refs.get(key) != ours:
        return
    with contextlib.suppress(PreconditionFailedError, NotFoundError):
        refs.commit([Remove(key)], [AssertEquals(key, ours)])
