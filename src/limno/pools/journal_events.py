"""What a journal entry tells, as events (see :mod:`limno.pools.events`, whose feed reads
the journals): a pool created, renamed or dropped; a branch or tag moved, a commit
made (a move to a new commit whose first parent is the old head), a branch protected;
a maintenance job's state; a merge request opened, merged or closed. One entry may
tell several events; each is ``(kind, pool, ref, data)``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from limno.core.commits import CommitStore
from limno.errors import CorruptError, NotFoundError

__all__ = ["Told", "job_events", "pool_events", "ref_events", "review_events"]

#: one event an entry tells: (kind, pool, ref, data)
Told = tuple[str, str | None, str | None, dict[str, Any]]


def pool_events(entry: Mapping[str, Any], before: Mapping[str, dict[str, Any]]) -> list[Told]:
    items = dict(before)
    told: list[Told] = []
    for u in entry["updates"]:
        key, value, old = u["key"], u.get("value"), items.get(u["key"])
        if u.get("op") == "put" and isinstance(value, dict):
            name = str(value.get("name"))
            if old is None:
                data = {"kind": value.get("kind"), "key": value.get("key")}
                told.append(("pool.created", key, name, data))
            elif old.get("name") != name:
                told.append(("pool.renamed", key, name, {"old_name": old.get("name")}))
            else:
                told.append(("pool.updated", key, name, {}))
            items[key] = value
        elif old is not None:
            told.append(("pool.dropped", key, str(old.get("name")), {}))
            items.pop(key)
    return told


#: the branch-store key prefix of a protection rule (limno.core.protection's PREFIX)
_PROTECTED = "protected"


def _protection_events(
    branch: str, update: Mapping[str, Any], items: dict[str, dict[str, Any]]
) -> list[Told]:
    """``branch.protected`` when a rule appears, ``branch.unprotected`` when it goes
    (``items``, the map before ``update``, is brought up to date)."""
    key, value = update["key"], update.get("value")
    if update.get("op") == "put" and isinstance(value, dict):
        had = key in items
        items[key] = value
        return [] if had else [("branch.protected", None, None, {"branch": branch, **value})]
    if items.pop(key, None) is None:
        return []
    return [("branch.unprotected", None, None, {"branch": branch})]


def ref_events(
    entry: Mapping[str, Any], before: Mapping[str, dict[str, Any]], commits: CommitStore
) -> list[Told]:
    """Branch and tag events of one branches-journal entry, and protection rules coming
    and going (vacuum's keys tell nothing).

    A branch moved to a commit whose first parent is the old head is also a ``commit``
    event, told first, unless another ref already pointed at that commit (a
    fast-forward merge of a branch: that commit was told on its own branch).
    """
    items = dict(before)
    told: list[Told] = []
    for u in entry["updates"]:
        key = u["key"]
        kind, sep, name = key.partition(":")
        if sep and kind == _PROTECTED:
            told += _protection_events(name, u, items)
            continue
        if not sep or kind not in ("branch", "tag"):
            continue
        old = items.get(key, {}).get("commit")
        value = u.get("value")
        new = value.get("commit") if u.get("op") == "put" and isinstance(value, dict) else None
        if new is None:
            items.pop(key, None)
            if old is not None:
                told.append((f"{kind}.deleted", None, None, {kind: name, "commit": old}))
            continue
        if old is None:
            told.append((f"{kind}.created", None, None, {kind: name, "commit": new}))
        elif old != new:
            if kind == "branch":
                others = {v.get("commit") for k, v in items.items() if k != key and ":" in k}
                made = _commit_data(commits, name, old, new) if new not in others else None
                if made is not None:
                    told.append(("commit", None, None, made))
            told.append((f"{kind}.moved", None, None, {kind: name, "old": old, "new": new}))
        items[key] = {"commit": new}
    return told


def _commit_data(commits: CommitStore, branch: str, old: str, new: str) -> dict[str, Any] | None:
    """The ``commit`` event of a branch move, or None if the move made no new commit."""
    try:
        commit = commits.get(new)
    except (NotFoundError, CorruptError):
        return None  # gone (a dropped pool) or unreadable: the move is still told
    if not commit.parents or commit.parents[0] != old:
        return None
    counts: dict[str, int] = {}
    rows = {"added": 0, "deleted": 0}
    for action in commit.actions:
        counts[action.op] = counts.get(action.op, 0) + 1
        n = action.value.get("rows")
        if isinstance(n, int) and not isinstance(n, bool):
            rows["deleted" if action.op == "delete" else "added"] += n
    return {
        "branch": branch,
        "commit": commit.id,
        "parents": list(commit.parents),
        "author": commit.author,
        "message": commit.message,
        "date": commit.date,
        "actions": counts,
        "rows": rows,
        "merge": len(commit.parents) > 1,
    }


_JOB_FIELDS = ("kind", "state", "partition", "inputs", "rows_in", "rows_out", "seconds")


def job_events(entry: Mapping[str, Any]) -> list[Told]:
    told: list[Told] = []
    for u in entry["updates"]:
        record = u.get("value")
        if u.get("op") != "put" or not isinstance(record, dict):
            continue
        data = {"job": u["key"], **{k: record.get(k) for k in _JOB_FIELDS}}
        data.update(commit=record.get("commit"), error=record.get("error"))
        told.append((f"job.{record.get('state')}", None, None, data))
    return told


#: the fields of a merge request its events carry (limno.pools.reviews.MergeRequest's)
_REVIEW_FIELDS = ("id", "title", "source", "into", "author", "state")


def review_events(entry: Mapping[str, Any], before: Mapping[str, dict[str, Any]]) -> list[Told]:
    """``merge_request.opened`` when a request appears, ``.merged`` / ``.closed`` when its
    state becomes that (a merge's claim, a failed attempt: nothing)."""
    items = dict(before)
    told: list[Told] = []
    for u in entry["updates"]:
        value = u.get("value")
        if u.get("op") != "put" or not isinstance(value, dict) or not u["key"].startswith("mr:"):
            continue
        old = items.get(u["key"])
        items[u["key"]] = value
        data = {k: value.get(k) for k in _REVIEW_FIELDS}
        state = value.get("state")
        if old is None:
            told.append(("merge_request.opened", None, None, data))
        elif state != old.get("state") and state in ("merged", "closed"):
            data.update(by=value.get("done_by"), commit=value.get("commit"))
            told.append((f"merge_request.{state}", None, None, data))
    return told
