"""The JSON form of everything the lake interface passes over HTTP.

``limno serve`` and its client (:mod:`limno.api.remote`) both use these functions,
so a value that crosses the wire comes back equal to the one sent: a commit, a data
object, a merge result, a key bound of any sortable Arrow type. Model types that
have a stored form (commits, data objects, pool configurations, hooks, typed
schemas) travel in it; the rest get theirs here. Arrow tables do not travel as
JSON: see :mod:`limno.server.formats`.

Model modules are imported where a function needs them: the client of ``limno ls``
must not load the versioning core to read a pool listing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from limno.errors import InvalidInputError
from limno.units import check_time

if TYPE_CHECKING:
    from limno.core.commits import Commit
    from limno.core.hooks import HookSpec
    from limno.core.versioning import DiffEntry, MergeResult
    from limno.data.objects import DataObject
    from limno.data.typed_schema import TypedSchema
    from limno.engines.query_limits import QueryLimits
    from limno.faults import Fault
    from limno.pools.records.compaction import JobResult
    from limno.pools.registry import PoolConfig
    from limno.pools.vacuum import Retention, VacuumReport

__all__ = [
    "commit_from_json",
    "commit_to_json",
    "config_from_json",
    "config_to_json",
    "diff_from_json",
    "diff_to_json",
    "fault_from_json",
    "fault_to_json",
    "hook_from_json",
    "hook_to_json",
    "job_from_json",
    "job_to_json",
    "limits_from_json",
    "limits_to_json",
    "merge_from_json",
    "merge_to_json",
    "object_from_json",
    "object_to_json",
    "retention_from_json",
    "retention_to_json",
    "schema_from_json",
    "schema_to_json",
    "time_from_json",
    "time_to_json",
    "vacuum_from_json",
    "vacuum_to_json",
    "value_from_json",
    "value_to_json",
]


# -- values: key bounds and keys of any sortable type, times, durations -------------------


def value_to_json(v: Any) -> Any:
    """A JSON form of a key value, a bound (text, scalar or tuple) or a nested value.

    Scalars take the stored form of key values (:func:`limno.data.keys.encode_value`,
    one-key objects such as ``{"decimal": "1.5"}``); tuples, lists and mappings get
    tags of their own so that none of them reads back as another.
    """
    from limno.data.keys import encode_value

    if isinstance(v, tuple):
        return {"tuple": [value_to_json(x) for x in v]}
    if isinstance(v, list):
        return {"list": [value_to_json(x) for x in v]}
    if isinstance(v, Mapping):
        return {"struct": [[str(k), value_to_json(x)] for k, x in v.items()]}
    return encode_value(v)


def value_from_json(v: Any) -> Any:
    """Inverse of :func:`value_to_json`; InvalidInputError for a form it never writes."""
    from limno.data.keys import decode_value

    if not isinstance(v, dict):
        return v
    if len(v) != 1:
        raise InvalidInputError(f"not an encoded value: {v!r:.80}")
    ((kind, raw),) = v.items()
    if kind == "tuple":
        return tuple(value_from_json(x) for x in raw)
    if kind == "list":
        return [value_from_json(x) for x in raw]
    if kind == "struct":
        return {str(k): value_from_json(x) for k, x in raw}
    try:
        return decode_value(v)
    except (TypeError, ValueError, ArithmeticError) as e:
        raise InvalidInputError(f"not an encoded value: {v!r:.80} ({e!s:.80})") from None


def time_to_json(t: dt.datetime | None) -> str | None:
    if t is None:
        return None
    check_time(t)
    return t.isoformat()


def time_from_json(text: str | None) -> dt.datetime | None:
    if text is None:
        return None
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(f"invalid time {text!r} (use ISO 8601)") from None


def _duration(d: dt.timedelta) -> int:
    return d // dt.timedelta(microseconds=1)


def retention_to_json(r: Retention) -> Any:
    """A retention (one window, windows by branch glob, or none) in microseconds."""
    if r is None or isinstance(r, dt.timedelta):
        return None if r is None else _duration(r)
    return {glob: _duration(d) for glob, d in r.items()}


def retention_from_json(v: Any) -> Retention:
    if v is None:
        return None
    if isinstance(v, dict):
        return {str(g): dt.timedelta(microseconds=int(us)) for g, us in v.items()}
    return dt.timedelta(microseconds=int(v))


# -- model types --------------------------------------------------------------------------


def commit_to_json(c: Commit) -> dict[str, Any]:
    return c.to_json()


def commit_from_json(d: Mapping[str, Any]) -> Commit:
    from limno.core.commits import Commit

    return Commit.from_json(d)


def object_to_json(o: DataObject) -> dict[str, Any]:
    out = o.to_json()
    if o.clip is not None:  # not stored, but what objects() of a partitioned pool says
        lo, hi = o.clip
        out["clip"] = [value_to_json(lo), value_to_json(hi)]
    return out


def object_from_json(d: Mapping[str, Any]) -> DataObject:
    import dataclasses

    from limno.data.objects import DataObject

    obj = DataObject.from_json(d)
    if "clip" in d:
        lo, hi = (value_from_json(b) for b in d["clip"])
        obj = dataclasses.replace(obj, clip=(lo, hi))
    return obj


def config_to_json(c: PoolConfig) -> dict[str, Any]:
    return c.to_json()


def config_from_json(d: Mapping[str, Any]) -> PoolConfig:
    from limno.pools.registry import PoolConfig

    return PoolConfig.from_json(d)


def hook_to_json(h: HookSpec) -> dict[str, Any]:
    return h.to_json()


def hook_from_json(d: Mapping[str, Any]) -> HookSpec:
    from limno.core.hooks import HookSpec

    return HookSpec.from_json(d)


def schema_to_json(s: TypedSchema | None) -> dict[str, Any] | None:
    return None if s is None else s.to_json()


def schema_from_json(d: Mapping[str, Any] | None) -> TypedSchema | None:
    from limno.data.typed_schema import TypedSchema

    return None if d is None else TypedSchema.from_json(d)


def merge_to_json(m: MergeResult) -> dict[str, Any]:
    return {"kind": m.kind, "commit": m.commit, "base": m.base, "resolved": list(m.resolved)}


def merge_from_json(d: Mapping[str, Any]) -> MergeResult:
    from limno.core.versioning import MergeResult

    return MergeResult(d["kind"], d["commit"], d.get("base"), tuple(d.get("resolved", ())))


def diff_to_json(e: DiffEntry) -> dict[str, Any]:
    return {"change": e.change, "key": e.key, "old": e.old, "new": e.new}


def diff_from_json(d: Mapping[str, Any]) -> DiffEntry:
    from limno.core.versioning import DiffEntry

    return DiffEntry(d["change"], d["key"], d.get("old"), d.get("new"))


def job_to_json(r: JobResult) -> dict[str, Any]:
    return {
        "job": r.job.to_json(),
        "rows_in": r.rows_in,
        "rows_out": r.rows_out,
        "outputs": list(r.outputs),
        "seconds": r.seconds,
    }


def job_from_json(d: Mapping[str, Any]) -> JobResult:
    from limno.pools.records.compaction import CompactionJob, JobResult

    job = d["job"]
    return JobResult(
        CompactionJob(job["id"], job["partition"], tuple(job["inputs"])),
        int(d["rows_in"]),
        int(d["rows_out"]),
        tuple(d["outputs"]),
        float(d["seconds"]),
    )


def vacuum_to_json(r: VacuumReport) -> dict[str, Any]:
    return {
        "removed": [[path, size] for path, size in r.removed],
        "too_young": r.too_young,
        "referenced": r.referenced,
        "leased": r.leased,
        "dry_run": r.dry_run,
    }


def vacuum_from_json(d: Mapping[str, Any]) -> VacuumReport:
    from limno.pools.vacuum import VacuumReport

    return VacuumReport(
        removed=[(str(path), int(size)) for path, size in d["removed"]],
        too_young=int(d["too_young"]),
        referenced=int(d["referenced"]),
        leased=int(d["leased"]),
        dry_run=bool(d["dry_run"]),
    )


def fault_to_json(f: Fault) -> dict[str, Any]:
    return {"path": f.path, "problem": f.problem, "fix": f.fix}


def fault_from_json(d: Mapping[str, Any]) -> Fault:
    from limno.faults import Fault

    return Fault(d["path"], d["problem"], d.get("fix", ""))


def limits_to_json(q: QueryLimits) -> dict[str, Any]:
    return {"timeout": q.timeout, "max_rows": q.max_rows, "max_bytes": q.max_bytes}


def limits_from_json(d: Mapping[str, Any] | None) -> QueryLimits | None:
    from limno.engines.query_limits import QueryLimits

    if d is None:
        return None
    try:
        return QueryLimits(d.get("timeout"), d.get("max_rows"), d.get("max_bytes"))
    except TypeError as e:
        raise InvalidInputError(f"query limits: {e}") from None
