"""The git operations over HTTP, for a remote pool of either kind.

:class:`RemoteGit` is what :class:`~limno.api.remote.RemotePool` (records) and
:class:`~limno.api.remote_files.RemoteFilePool` (files) share: branches, tags,
history, merge, diff, cherry-pick, reset, revert, hooks and vacuum, each one request
to the pool's routes (``/v1/pools/{id}/branches``, ``/log``, ``/merge``...), which the
server runs on a pool of either kind. With :class:`~limno.api.remote_protect.
RemoteProtection` it implements :class:`~limno.api.base_versioned.VersionedPool`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from limno.api import wire
from limno.api.remote_protect import RemoteProtection
from limno.api.remote_reviews import RemoteReviews

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.api.remote_http import Connection
    from limno.core.commits import Commit
    from limno.core.hooks import HookSpec
    from limno.core.versioning import DiffEntry, MergeResult
    from limno.pools.registry import PoolConfig
    from limno.pools.vacuum import Retention, VacuumReport

__all__ = ["RemoteGit", "check_ref_name", "segment"]


def check_ref_name(kind: str, name: str) -> None:
    """A new branch's or tag's name, checked before a request is sent, in the lake's
    words (as the server's lake would)."""
    from limno.core.refs import validate_ref_name

    validate_ref_name(kind, name)


def segment(text: str) -> str:
    """``text`` as one segment of a URL path (``.`` and ``..`` encoded too: a client
    would resolve them as dot segments; the server decodes them as names)."""
    return quote(text, safe="") if text.strip(".") else text.replace(".", "%2E")


class RemoteGit(RemoteReviews, RemoteProtection):
    """Mixin of the remote pools: git operations, hooks, vacuum (one request each)."""

    #: set by the pool: the server connection, its configuration, its path (``/v1/pools/<id>``)
    _http: Connection
    config: PoolConfig
    _path: str

    def _init_remote(self, http: Connection, config: PoolConfig) -> None:
        """What every remote pool sets: addressed by its id (renames keep it)."""
        self._http = http
        self.config = config
        self._path = f"/v1/pools/{segment(config.id)}"

    def _call(self, method: str, op: str, params: Any = None, body: Any = None) -> Any:
        return self._http.call(method, f"{self._path}/{op}", params, body)

    # -- refs and history ------------------------------------------------------------------
    def branches(self) -> dict[str, str]:
        return dict(self._call("GET", "branches"))

    def tags(self) -> dict[str, str]:
        return dict(self._call("GET", "tags"))

    def branch(self, name: str, from_ref: str | None = None) -> str:
        check_ref_name("branch", name)
        return str(
            self._call("POST", "branches", body={"name": name, "from_ref": from_ref})["commit"]
        )

    def delete_branch(self, name: str) -> str:
        return str(self._call("DELETE", f"branches/{segment(name)}")["commit"])

    def tag(self, name: str, from_ref: str | None = None) -> str:
        check_ref_name("tag", name)
        return str(self._call("POST", "tags", body={"name": name, "from_ref": from_ref})["commit"])

    def delete_tag(self, name: str) -> str:
        return str(self._call("DELETE", f"tags/{segment(name)}")["commit"])

    def resolve(self, ref: str | None = None, as_of: dt.datetime | None = None) -> str:
        params = {"ref": ref, "as_of": wire.time_to_json(as_of)}
        return str(self._call("GET", "resolve", params)["commit"])

    def log(
        self,
        ref: str | None = None,
        limit: int | None = None,
        first_parent: bool = False,
        *,
        as_of: dt.datetime | None = None,
    ) -> list[Commit]:
        params = {"ref": ref, "limit": limit, "first_parent": first_parent}
        params["as_of"] = wire.time_to_json(as_of)
        return [wire.commit_from_json(c) for c in self._call("GET", "log", params)]

    def merge(
        self,
        source: str,
        into: str = "main",
        strategy: str = "fail",
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
        fast_forward: bool = True,
    ) -> MergeResult:
        body = {
            "source": source,
            "into": into,
            "strategy": strategy,
            "message": message,
            "author": author,
            "meta": None if meta is None else dict(meta),
            "fast_forward": fast_forward,
        }
        return wire.merge_from_json(self._call("POST", "merge", body=body))

    def diff(
        self,
        old: str,
        new: str | None = None,
        three_dot: bool = False,
        *,
        as_of: dt.datetime | None = None,
    ) -> list[DiffEntry]:
        params = {"old": old, "new": new, "three_dot": three_dot}
        params["as_of"] = wire.time_to_json(as_of)
        return [wire.diff_from_json(e) for e in self._call("GET", "diff", params)]

    def cherry_pick(self, commit: str, branch: str = "main", strategy: str = "fail") -> Commit:
        body = {"commit": commit, "branch": branch, "strategy": strategy}
        return wire.commit_from_json(self._call("POST", "cherry-pick", body=body))

    def reset(self, branch: str, ref: str) -> tuple[str, str]:
        done = self._call("POST", "reset", body={"branch": branch, "ref": ref})
        return str(done["old"]), str(done["new"])

    def revert(
        self, commit_id: str, branch: str = "main", message: str = "", author: str | None = None
    ) -> Commit:
        body = {"commit": commit_id, "branch": branch, "message": message, "author": author}
        return wire.commit_from_json(self._call("POST", "revert", body=body))

    # -- hooks -----------------------------------------------------------------------------
    def hook_specs(self) -> list[HookSpec]:
        return [wire.hook_from_json(h) for h in self._call("GET", "hooks")]

    def add_hook(self, spec: HookSpec) -> None:
        self._call("POST", "hooks", body=wire.hook_to_json(spec))

    def remove_hook(self, name: str) -> None:
        self._call("DELETE", f"hooks/{segment(name)}")

    # -- maintenance -----------------------------------------------------------------------
    def vacuum(
        self,
        grace: dt.timedelta | None = None,
        dry_run: bool = False,
        retention: Retention = None,
    ) -> VacuumReport:
        body = {
            "grace": wire.retention_to_json(grace),
            "dry_run": dry_run,
            "retention": wire.retention_to_json(retention),
        }
        return wire.vacuum_from_json(self._call("POST", "vacuum", body=body))

    def status(
        self, ref: str | None = None, limit: int = 20, rows: int | None = None
    ) -> dict[str, pa.Table]:
        """``limno status``'s reports of a pool of either kind (Arrow IPC in base64)."""
        import base64

        from pyarrow import ipc

        reports = self._call("GET", "status", {"ref": ref, "limit": limit, "rows": rows})
        return {
            title: ipc.open_stream(base64.b64decode(data)).read_all()
            for title, data in reports.items()
        }
