"""JSON of merge requests and comparisons (:mod:`limno.pools.reviews`), shared by the
server's routes and the remote pool: a merge request's JSON is the one it is stored as."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from limno.api.wire import diff_from_json, diff_to_json

if TYPE_CHECKING:
    from limno.pools.review_compare import Comparison
    from limno.pools.reviews import MergeRequest

__all__ = ["comparison_from_json", "comparison_to_json", "mr_from_json", "mr_to_json"]


def mr_to_json(mr: MergeRequest) -> dict[str, Any]:
    return mr.to_json()


def mr_from_json(d: Mapping[str, Any]) -> MergeRequest:
    from limno.pools.reviews import MergeRequest

    return MergeRequest.from_json(d)


def comparison_to_json(c: Comparison) -> dict[str, Any]:
    return {
        "pool": c.pool,
        "kind": c.kind,
        "source": c.source,
        "dest": c.dest,
        "source_commit": c.source_commit,
        "dest_commit": c.dest_commit,
        "base": c.base,
        "counts": dict(c.counts),
        "entries": [diff_to_json(e) for e in c.entries],
        "truncated": c.truncated,
        "conflicts": list(c.conflicts),
        "sample": [s.to_json() for s in c.sample],
    }


def comparison_from_json(d: Mapping[str, Any]) -> Comparison:
    from limno.pools.review_compare import Comparison, Sampled

    return Comparison(
        pool=str(d["pool"]),
        kind=str(d["kind"]),
        source=str(d["source"]),
        dest=str(d["dest"]),
        source_commit=str(d["source_commit"]),
        dest_commit=str(d["dest_commit"]),
        base=d.get("base"),
        counts={str(k): int(v) for k, v in d["counts"].items()},
        entries=tuple(diff_from_json(e) for e in d.get("entries") or ()),
        truncated=bool(d.get("truncated")),
        conflicts=tuple(str(k) for k in d.get("conflicts") or ()),
        sample=tuple(Sampled.from_json(s) for s in d.get("sample") or ()),
    )
