"""Which Kafka offsets a pool holds: read from, and written to, commit meta.

Every commit of ``limno kafka from`` carries, under the meta key ``kafka``:

* ``batch``: what this commit holds, ``{topic: {partition: [first, last]}}``;
* ``offsets``: everything of the topic synced into the branch so far,
  ``{topic: {partition: last}}``: the full map, not just this batch's range.

So resuming reads one commit, the newest one of the branch's history whose
``offsets`` name the topic (normally the head itself), and never scans the data.
Partitions are JSON object keys, hence text (``"0"``). Offsets are Kafka's own:
a partition resumes at ``last + 1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from limno.errors import CorruptError

if TYPE_CHECKING:
    from limno.api import Pool
    from limno.core.commits import Commit

__all__ = ["META_KEY", "batch_meta", "committed_offsets"]

#: the commit meta key of Kafka offsets
META_KEY = "kafka"
#: commits read per log call at first; each further call reads this many times more
_FIRST_LOOK = 4


def committed_offsets(pool: Pool, branch: str, topic: str) -> dict[int, int]:
    """``{partition: last offset}`` of ``topic`` in ``branch``'s history (empty: none).

    Reads the branch's log newest first, a few commits, then more, until a commit
    names the topic or the history ends."""
    limit = _FIRST_LOOK
    while True:
        commits = pool.log(branch, limit=limit)
        for commit in commits:
            found = _offsets(commit, topic)
            if found is not None:
                return found
        if len(commits) < limit:
            return {}
        limit *= 16


def _offsets(commit: Commit, topic: str) -> dict[int, int] | None:
    kafka = commit.meta.get(META_KEY)
    if not isinstance(kafka, Mapping):
        return None
    offsets = kafka.get("offsets")
    if not isinstance(offsets, Mapping) or topic not in offsets:
        return None
    by_partition = offsets[topic]
    try:
        if not isinstance(by_partition, Mapping):
            raise TypeError(by_partition)
        return {int(p): _offset(last) for p, last in by_partition.items()}
    except (TypeError, ValueError):
        raise CorruptError(
            f"commit {commit.id}: its meta {META_KEY}.offsets.{topic} is not a map of "
            "partition to offset"
        ) from None


def _offset(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(value)
    return value


def batch_meta(
    topic: str, ranges: Mapping[int, tuple[int, int]], offsets: Mapping[int, int]
) -> dict[str, Any]:
    """The meta of a commit holding ``ranges`` (partition: first, last) of ``topic``,
    after which the topic's offsets are ``offsets`` (partition: last)."""
    return {
        META_KEY: {
            "batch": {
                topic: {str(p): [first, last] for p, (first, last) in sorted(ranges.items())}
            },
            "offsets": {topic: {str(p): last for p, last in sorted(offsets.items())}},
        }
    }
