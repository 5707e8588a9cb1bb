"""The operations pages: every pool's maintenance at a glance (``/operations``), and one
pool's (``/operations?pool=NAME``): its partitions (the split tree), its jobs
(compactions, splits, vacuums, ingest commits and the ingest batcher's jobs) with
their state and duration, the rest of ``limno status``'s reports, and a verify run.

Everything comes from the lake interface, as ``limno status`` and ``limno verify``
get it (:meth:`~limno.api.base.Pool.status`, :meth:`~limno.api.base.Lake.verify`;
the /v1 ``status`` and ``verify`` routes call the same), with the same rules: a
viewer sees the pools it may read, and may verify those (verify only reads). The
page listens to the lake's events (``/events``) and re-renders its live region when
a job or a commit happens, so a compaction shows up without a reload.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import Response

from limno.errors import LimnoError
from limno.pools.inspect import total_rows
from limno.ui.pages import Signed, lake_of, page_router, render

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.api.base import Lake
    from limno.pools.registry import PoolConfig

router = page_router()

#: rows of a report the page shows at most (a pool may have 100,000 objects)
REPORT_ROWS = 50
#: partitions of the split tree shown at most
TREE_ROWS = 200
#: faults a verify run lists at most
FAULTS = 200
#: the latest jobs of each kind the summary of a pool counts (and ingest commits among
#: 4 times as many of the latest commits, as ``status`` finds them)
SUMMARY_JOBS = 50
#: the reports that are jobs (each row one job with a state and its seconds)
JOB_REPORTS = ("compaction_jobs", "other_jobs", "ingest_batches")


@dataclass
class PoolJobs:
    """A pool's line in the lake-wide summary: its latest jobs counted by kind and
    state, the last one, and why there is nothing to count (a file pool, an error)."""

    config: PoolConfig
    counts: dict[str, Counter[str]] = field(default_factory=dict)
    last: dict[str, Any] | None = None
    ingest_commits: int = 0
    note: str = ""

    @property
    def total(self) -> int:
        return sum(sum(c.values()) for c in self.counts.values())


def _jobs_of(table: pa.Table) -> list[dict[str, Any]]:
    return [row for row in table.to_pylist() if row.get("id")]


def summarize(lake: Lake, config: PoolConfig) -> PoolJobs:
    """``config``'s pool's latest jobs (:data:`SUMMARY_JOBS` of each report)."""
    out = PoolJobs(config)
    if config.kind != "records":
        out.note = "file pool: no partitions or compaction jobs"
        return out
    try:
        reports = lake.pool(config.id).status(None, SUMMARY_JOBS, rows=0)  # its jobs only
    except LimnoError as e:  # no main branch, a damaged pool: say so, list the others
        out.note = str(e)
        return out
    latest: list[dict[str, Any]] = []
    for name in JOB_REPORTS:
        if name not in reports:
            continue
        for job in _jobs_of(reports[name]):
            kind = "ingest batch" if name == "ingest_batches" else str(job.get("kind"))
            out.counts.setdefault(kind, Counter())[str(job.get("state"))] += 1
            latest.append({**job, "kind": kind})
    ingest = reports.get("ingest_jobs")
    out.ingest_commits = 0 if ingest is None else ingest.num_rows
    out.last = max(latest, key=lambda j: str(j.get("created") or ""), default=None)
    return out


def _verified(lake: Lake, pool: str) -> list[Any]:
    faults: list[Any] = []
    for fault in lake.verify(pool):
        faults.append(fault)
        if len(faults) >= FAULTS:
            break
    return faults


@router.get("/operations")
def operations_page(
    request: Request, viewer: Signed, pool: str = "", ref: str = "main", verify: int = 0
) -> Response:
    viewer.need("read")
    lake = lake_of(request)
    pools = [c for c in lake.list_pools() if viewer.can("read", c.id)]
    chosen = next((c for c in pools if pool in (c.name, c.id)), None) if pool else None
    if pool and chosen is None:
        # as the /v1 routes answer: no such pool (404), or one the viewer may not read (403)
        config = lake.versioned_pool(pool).config
        viewer.need_pool("read", config.id, config.name, pool)
    detail = _detail(lake, chosen, ref) if chosen is not None else {}
    return render(
        request,
        "operations.html",
        title=f"Operations: {chosen.name}" if chosen else "Operations",
        section="operations",
        pools=pools,
        summary=[summarize(lake, c) for c in pools] if chosen is None else [],
        summary_jobs=SUMMARY_JOBS,
        chosen=chosen,
        ref=ref,
        faults=_verified(lake, chosen.name) if verify and chosen is not None else None,
        **detail,
    )


def _detail(lake: Lake, chosen: PoolConfig, ref: str) -> dict[str, Any]:
    """One pool's partitions, jobs and other reports (records pools; a file pool has
    none of them)."""
    if chosen.kind != "records":
        return {"tree": [], "jobs": {}, "reports": {}}
    tables = lake.pool(chosen.id).status(ref, REPORT_ROWS, rows=max(TREE_ROWS, REPORT_ROWS))
    partitions = tables.pop("partitions", None)
    tree = [] if partitions is None else partitions.slice(0, TREE_ROWS).to_pylist()
    jobs = {name: _jobs_of(tables.pop(name)) for name in JOB_REPORTS if name in tables}
    reports = {name: (t.slice(0, REPORT_ROWS), total_rows(t)) for name, t in tables.items()}
    return {
        "tree": tree,
        "tree_total": 0 if partitions is None else partitions.num_rows,
        "jobs": jobs,
        "reports": reports,
        "key_columns": [],
    }
