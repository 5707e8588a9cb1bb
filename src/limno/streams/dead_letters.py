"""Dead letters of ``kafka from --dead-letter POOL[@BRANCH]``: messages that do not
decode (bad JSON, not an envelope, a wrong magic byte, an unknown schema id, an Avro
body that does not decode, a key or header that is not UTF-8) go to a pool of their
own instead of failing their batch.

A dead letter is ``{kafka:{topic, partition, offset, timestamp}, key, value, headers,
reason}``: the message's position, its key and value as they came (binary: JSON shows
them as base64), its headers (values binary too) and why it did not decode. The pool
is created keyed on ``kafka.offset`` when missing, like the target.

Exactly once, without a commit across two pools (the lake has none: each pool's
branch is its own journal): a batch's dead letters are committed FIRST, their commit's
meta recording the offsets of the whole batch (the same ``kafka`` meta as the
target's, :mod:`.kafka_offsets`), then the batch's good records to the target. A crash
between the two leaves dead letters whose batch the target lacks; the restart reads
that batch again from the target's offsets, and sets aside again only the bad
messages after the offsets the dead-letter pool records: none is lost (the target's
offsets decide what is read again) and none is repeated (the dead-letter pool's
decide which were already set aside). A batch of nothing but dead letters commits
only to the dead-letter pool (the lake makes no empty commits); the target's offsets
then stay behind it, so a restart reads those messages again and sets none aside
twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from limno.errors import InvalidInputError, NotFoundError
from limno.streams.kafka_offsets import branch_offsets, topics_meta
from limno.streams.kafka_records import KAFKA_TYPE, Bad, batch_ranges, position

if TYPE_CHECKING:
    from confluent_kafka import Message

    from limno.api import Lake, Pool
    from limno.core.commits import Commit

__all__ = ["DEAD_TYPE", "DeadLetters", "check_own_branch"]

DEAD_TYPE = pa.schema(
    [
        ("kafka", KAFKA_TYPE),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ("reason", pa.string()),
    ]
)
#: the key of a dead-letter pool made here (as the target's)
_KEY = "kafka.offset"


def _raw(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _table(bad: Sequence[Bad]) -> pa.Table:
    rows = []
    for m, reason in bad:
        kind, ms = m.timestamp()
        headers = m.headers() or []
        pairs = headers.items() if isinstance(headers, dict) else headers
        rows.append(
            {
                "kafka": {
                    "topic": m.topic(),
                    "partition": m.partition(),
                    "offset": m.offset(),
                    "timestamp": ms if kind != 0 and ms >= 0 else None,
                },
                "key": _raw(m.key()),
                "value": _raw(m.value()),
                "headers": [{"key": k, "value": _raw(v)} for k, v in pairs],
                "reason": reason,
            }
        )
    schema = DEAD_TYPE.set(0, pa.field("kafka", _KAFKA_MS))
    return pa.Table.from_pylist(rows, schema=schema).cast(DEAD_TYPE)


#: the kafka struct with its timestamp as epoch milliseconds (cast afterwards)
_KAFKA_MS = pa.struct(
    [*(f for f in KAFKA_TYPE if f.name != "timestamp"), ("timestamp", pa.int64())]
)


def check_own_branch(ref: str, pool: str, branch: str) -> None:
    """``ref`` (``--dead-letter``) refused by name when it is the target ``pool@branch``,
    before anything is read or made (:meth:`DeadLetters.open` checks again by pool id:
    a rename in between)."""
    from limno.core.refs import parse_pool_ref

    name, named = parse_pool_ref(ref)
    if (name, named or "main") == (pool, branch):
        raise _on_target_branch(ref, pool, branch)


def _on_target_branch(ref: str, pool: str, branch: str) -> InvalidInputError:
    return InvalidInputError(
        f"--dead-letter {ref} is the target branch {pool}@{branch}: "
        "dead letters need a pool or branch of their own"
    )


class DeadLetters:
    """The dead-letter pool of one sync (see the module docstring)."""

    def __init__(
        self, pool: Pool, branch: str, topics: Sequence[str], log: Callable[[str], None]
    ) -> None:
        self.pool, self.branch, self.log = pool, branch, log
        #: what the pool's dead letters cover already: ``{topic: {partition: last}}``
        self.covered = branch_offsets(pool, branch, list(topics))[1]
        #: dead letters committed by this object (none twice)
        self.count = 0

    @classmethod
    def open(
        cls,
        lake: Lake,
        ref: str,
        topics: Sequence[str],
        log: Callable[[str], None],
        target: tuple[Pool, str] | None = None,
    ) -> DeadLetters:
        """The dead letters of ``ref`` (``POOL[@BRANCH]``; the pool made when missing).
        ``target`` (the sync's pool and branch) may not be that branch: the dead
        letters' commits, carrying the batch's offsets, would pass for the target's
        and the batch's good records would never be committed."""
        from limno.core.refs import parse_pool_ref

        name, branch = parse_pool_ref(ref)
        try:
            pool = lake.pool(name)
        except NotFoundError:
            log(f"kafka: creating dead-letter pool {name} (key {_KEY})")
            pool = lake.create_pool(name, _KEY)
        branch = branch or "main"
        if target is not None and (target[0].id, target[1]) == (pool.id, branch):
            raise _on_target_branch(ref, target[0].name, target[1])
        return cls(pool, branch, topics, log)

    def commit(self, bad: Sequence[Bad], batch: Sequence[Message]) -> Commit | None:
        """Commit the dead letters of ``batch`` not set aside before (None: none left)."""
        fresh = [
            (m, why)
            for m, why in bad
            if position(m)[1] > self.covered.get(str(m.topic()), {}).get(position(m)[0], -1)
        ]
        if not fresh:
            return None
        ranges = batch_ranges(batch)
        covered = {
            topic: {**self.covered.get(topic, {}), **{p: b for p, (_, b) in spans.items()}}
            for topic, spans in ranges.items()
        }
        covered = {**self.covered, **covered}
        first = fresh[0][0]
        commit = self.pool.load(
            [_table(fresh)],
            branch=self.branch,
            message=f"kafka {first.topic()}: {len(fresh)} dead letter(s), first: {fresh[0][1]}",
            meta=topics_meta(ranges, covered),
        )
        self.covered = covered
        self.count += len(fresh)
        where = ", ".join(f"{m.partition()}:{m.offset()}" for m, _ in fresh[:5])
        self.log(
            f"kafka: {commit.id} {len(fresh)} dead letter(s) to {self.pool.name} "
            f"(partition:offset {where}{', ...' if len(fresh) > 5 else ''})"
        )
        return commit
