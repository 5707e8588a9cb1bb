"""Merge requests in the lake's event feed: opened, merged and closed are told from the
pool's reviews journal, resumable like every other event."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from limno import Lake
from limno.pools.events import EventFeed


def _review_events(feed: EventFeed) -> list[tuple[str, dict[str, object]]]:
    return [
        (e.type, dict(e.data))
        for e in feed.events(follow=False)
        if e.type.startswith("merge_request.")
    ]


def test_merge_requests_are_told_as_they_open_merge_and_close(tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("logs", key="ts")
    pool.load([pa.table({"ts": [1, 2], "v": ["a", "b"]})])
    pool.branch("dev")
    pool.load([pa.table({"ts": [3], "v": ["c"]})], branch="dev")
    versioned = lake.versioned_pool("logs")
    kept = versioned.open_merge_request("dev", title="add c", author="ann")
    dropped = versioned.open_merge_request("dev", title="not this one", author="bob")
    storage = lake.storage  # type: ignore[attr-defined]
    middle = EventFeed(storage, None)
    _review_events(middle)  # read to the end: its position is after both openings
    after_open = middle.position()
    versioned.close_merge_request(dropped.id, author="bob")
    merged = versioned.merge_merge_request(kept.id, author="ann")

    told = _review_events(EventFeed(storage, None))
    assert [(t, d["id"]) for t, d in told] == [
        ("merge_request.opened", kept.id),
        ("merge_request.opened", dropped.id),
        ("merge_request.closed", dropped.id),
        ("merge_request.merged", kept.id),
    ]
    opened = told[0][1]
    assert (opened["title"], opened["source"], opened["into"], opened["author"]) == (
        "add c",
        "dev",
        "main",
        "ann",
    )
    assert told[3][1]["commit"] == merged.commit and told[3][1]["by"] == "ann"
    # resumed after the openings: the close and the merge only, each once
    later = _review_events(EventFeed(storage, after_open))
    assert [t for t, _ in later] == ["merge_request.closed", "merge_request.merged"]
    # a summary line for 'limno watch'
    event = next(
        e
        for e in EventFeed(storage, None).events(follow=False)
        if e.type.startswith("merge_request.")
    )
    assert event.summary() == f"!{kept.id} dev -> main: add c"
