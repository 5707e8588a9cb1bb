"""Which Kafka offsets a pool holds: read from, and written to, commit meta.

Every commit of ``limno kafka from`` carries, under the meta key ``kafka``:

* ``batch``: what this commit holds, ``{topic: {partition: [first, last]}}``;
* ``offsets``: everything of the topic synced into the branch so far,
  ``{topic: {partition: last}}``: the full map, not just this batch's range.

So resuming reads one commit, the newest one of the branch's history whose
``offsets`` name the topic (normally the head itself), and never scans the data. A
sync of several topics records all of them in each commit's ``offsets`` (and in
``batch`` those the commit holds records of).
Partitions are JSON object keys, hence text (``"0"``). Offsets are Kafka's own:
a partition resumes at ``last + 1``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from limno.errors import CorruptError

if TYPE_CHECKING:
    from limno.api import Pool
    from limno.core.commits import Commit

__all__ = ["META_KEY", "batch_meta", "branch_offsets", "committed_offsets", "topics_meta"]

#: the commit meta key of Kafka offsets
META_KEY = "kafka"
#: commits read per log call at first; each further call reads this many times more
_FIRST_LOOK = 4


def committed_offsets(pool: Pool, branch: str, topic: str) -> dict[int, int]:
    """``{partition: last offset}`` of ``topic`` in ``branch``'s history (empty: none)."""
    return branch_offsets(pool, branch, [topic])[1][topic]


def branch_offsets(
    pool: Pool, branch: str, topics: Sequence[str]
) -> tuple[str | None, dict[str, dict[int, int]]]:
    """The branch's head (None: no commit) and, as of it, ``{topic: {partition: last
    offset}}`` of each of ``topics`` (empty: none).

    Reads the branch's log newest first, a few commits, then more, until a commit
    names each topic or the history ends."""
    limit = _FIRST_LOOK
    while True:
        commits = pool.log(branch, limit=limit)
        found: dict[str, dict[int, int]] = {}
        for topic in topics:
            for commit in commits:
                offsets = _offsets(commit, topic)
                if offsets is not None:
                    found[topic] = offsets
                    break
        if len(found) == len(topics) or len(commits) < limit:
            head = commits[0].id if commits else None
            return head, {topic: found.get(topic, {}) for topic in topics}
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
    return topics_meta({topic: ranges}, {topic: offsets})


def topics_meta(
    ranges: Mapping[str, Mapping[int, tuple[int, int]]],
    offsets: Mapping[str, Mapping[int, int]],
) -> dict[str, Any]:
    """The meta of a commit holding ``ranges`` (topic: partition: first, last), after
    which the topics' offsets are ``offsets`` (topic: partition: last): every topic
    of the sync, those the batch has nothing of included."""
    return {
        META_KEY: {
            "batch": {
                topic: {str(p): [first, last] for p, (first, last) in sorted(spans.items())}
                for topic, spans in sorted(ranges.items())
            },
            "offsets": {
                topic: {str(p): last for p, last in sorted(lasts.items())}
                for topic, lasts in sorted(offsets.items())
            },
        }
    }
