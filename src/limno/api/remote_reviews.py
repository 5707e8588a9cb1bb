"""Merge requests over HTTP: one request each to ``/v1/pools/{id}/merge-requests...`` and
``/compare`` (served by :mod:`limno.server.routes.reviews` on a pool of either kind).

:class:`RemoteReviews` is a mixin of :class:`~limno.api.remote_git.RemoteGit`, so both
remote pool kinds implement the merge-request methods of
:class:`~limno.api.base_versioned.VersionedPool`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from limno.api import wire_reviews

if TYPE_CHECKING:
    from limno.pools.review_compare import Comparison
    from limno.pools.reviews import MergeRequest

__all__ = ["RemoteReviews"]


class RemoteReviews:
    """Mixin: merge requests of a remote pool (``_call`` is the pool's one request)."""

    if TYPE_CHECKING:

        def _call(self, method: str, op: str, params: Any = None, body: Any = None) -> Any: ...

    def open_merge_request(
        self,
        source: str,
        into: str = "main",
        title: str = "",
        description: str = "",
        author: str | None = None,
    ) -> MergeRequest:
        body = {
            "source": source,
            "into": into,
            "title": title,
            "description": description,
            "author": author,
        }
        return wire_reviews.mr_from_json(self._call("POST", "merge-requests", body=body))

    def merge_requests(self, state: str | None = None) -> list[MergeRequest]:
        found = self._call("GET", "merge-requests", {"state": state})
        return [wire_reviews.mr_from_json(m) for m in found]

    def merge_request(self, mr_id: str) -> MergeRequest:
        return wire_reviews.mr_from_json(self._call("GET", f"merge-requests/{_id(mr_id)}"))

    def merge_merge_request(
        self, mr_id: str, strategy: str = "fail", author: str | None = None
    ) -> MergeRequest:
        body = {"strategy": strategy, "author": author}
        done = self._call("POST", f"merge-requests/{_id(mr_id)}/merge", body=body)
        return wire_reviews.mr_from_json(done)

    def close_merge_request(self, mr_id: str, author: str | None = None) -> MergeRequest:
        done = self._call("POST", f"merge-requests/{_id(mr_id)}/close", body={"author": author})
        return wire_reviews.mr_from_json(done)

    def compare(
        self, source: str, into: str = "main", rows: int = 10, limit: int = 1000
    ) -> Comparison:
        params = {"source": source, "dest": into, "rows": rows, "limit": limit}
        return wire_reviews.comparison_from_json(self._call("GET", "compare", params))


def _id(mr_id: str) -> str:
    from limno.api.remote_git import segment

    return segment(mr_id)
