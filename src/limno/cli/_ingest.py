"""``limno ingest``: the ingest batcher (Sleeper's): submit files, run the batcher, list
the queue and its jobs, retry or drop failed files, tune a pool's batcher settings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from limno.cli._context import Context, format_option, pool_option
from limno.cli._data import INPUT_FORMATS
from limno.cli._output import write_dicts, write_rows, write_tables
from limno.cli._progress import activity
from limno.errors import LimnoError
from limno.lazy import lazy_module
from limno.units import format_size

if TYPE_CHECKING:
    from limno.api import Pool
    from limno.pools import ingest_queue
    from limno.pools.ingest_queue import IngestJob
else:
    ingest_queue = lazy_module("limno.pools.ingest_queue")

__all__ = ["COMMANDS"]


@click.group()
def ingest() -> None:
    """The ingest batcher: queue files, then load them in batched jobs (one commit each).

    Jobs are made by the pool's batcher settings ('limno ingest config') when
    'limno ingest run' or 'limno manage' runs."""


@ingest.command()
@pool_option
@click.option("-i", "--input-format", "ifmt", type=click.Choice(INPUT_FORMATS), default=None)
@click.option(
    "--copy",
    is_flag=True,
    help="Keep a copy in the lake (the file may then go); through a server files are"
    " always uploaded.",
)
@click.argument("files", nargs=-1, required=True)
@click.pass_obj
def submit(
    obj: Context, ref: str | None, ifmt: str | None, copy: bool, files: Sequence[str]
) -> None:
    """Queue FILES (local paths or s3:// URLs; each must exist) for the branch.

    Prints the id of each queued file."""
    name, branch = obj.branch_ref(ref)
    pool = obj.lake().pool(name)
    queued = pool.ingest_submit(list(files), ifmt, branch, copy=copy)
    for f in queued:
        click.echo(f.id)
    size = format_size(sum(f.size for f in queued))
    click.echo(f"queued {len(queued)} file(s), {size}, for {pool.name}@{branch}", err=True)


@ingest.command()
@click.option(
    "-p", "--pool", "ref", default=None, help="POOL[@BRANCH] (default: every pool, all branches)."
)
@click.option("--flush", is_flag=True, help="Batch every waiting file now, whatever the settings.")
@click.pass_obj
def run(obj: Context, ref: str | None, flush: bool) -> None:
    """Batch the waiting files and run the due jobs, each one commit.

    Prints the commit id of each job done; exits non-zero if a job failed (its
    files stay in the queue as failed: see 'limno ingest ls')."""
    lake = obj.lake()
    if ref:
        name, branch = obj.pool_ref(ref)
        pools = [lake.pool(name)]
    else:
        branch = None
        pools = [lake.pool(c.name) for c in lake.list_pools() if c.kind == "records"]
    failed = ran = 0
    for pool in pools:
        with activity(f"ingesting into {pool.name}"):
            jobs = pool.ingest_run(branch, force=flush)
        for job in jobs:
            ran += 1
            failed += job.state == "failed"
            _report(pool, job)
    if not ran:
        click.echo("no ingest job was due", err=True)
    if failed:
        raise LimnoError(f"{failed} of {ran} ingest job(s) failed (see 'limno ingest ls')")


def _report(pool: Pool, job: IngestJob) -> None:
    where = f"{pool.name}@{job.branch}"
    files = f"{len(job.files)} file(s), {format_size(job.bytes)}"
    if job.state == "done":
        click.echo(job.commit)
        click.echo(f"ingest job {job.id}: {files}, {job.rows} record(s) into {where}", err=True)
    else:
        click.echo(f"ingest job {job.id} {job.state}: {files} for {where}: {job.error}", err=True)


@ingest.command(name="ls")
@pool_option
@click.option("--jobs", "jobs", is_flag=True, help="List the jobs instead of the files.")
@format_option
@click.pass_obj
def ls(obj: Context, ref: str | None, jobs: bool, fmt: str | None) -> None:
    """The queue of the pool: files (with their state and job), or jobs."""
    name, _ = obj.pool_ref(ref)
    pool = obj.lake().pool(name)
    if jobs:
        write_tables([ingest_queue.jobs_table(pool.ingest_jobs())], obj.format(fmt))
    else:
        write_rows(ingest_queue.files_rows(pool.ingest_queue()), obj.format(fmt))


@ingest.command()
@pool_option
@click.argument("ids", nargs=-1, required=True)
@click.pass_obj
def retry(obj: Context, ref: str | None, ids: Sequence[str]) -> None:
    """Queue failed files IDS again (a job id stands for its files)."""
    name, _ = obj.pool_ref(ref)
    pool = obj.lake().pool(name)
    done = pool.ingest_retry(list(ids))
    click.echo(f"queued {len(done)} file(s) again in {pool.name}", err=True)


@ingest.command()
@pool_option
@click.argument("ids", nargs=-1, required=True)
@click.pass_obj
def drop(obj: Context, ref: str | None, ids: Sequence[str]) -> None:
    """Remove waiting or failed files IDS from the queue (a job id: its files)."""
    name, _ = obj.pool_ref(ref)
    pool = obj.lake().pool(name)
    done = pool.ingest_drop(list(ids))
    click.echo(f"dropped {len(done)} file(s) from the queue of {pool.name}", err=True)


@ingest.command()
@pool_option
@format_option
@click.argument("changes", nargs=-1)
@click.pass_obj
def config(obj: Context, ref: str | None, fmt: str | None, changes: Sequence[str]) -> None:
    """Show the pool's batcher settings, or change them:
    min-files=N max-files=N min-bytes=SIZE max-bytes=SIZE max-age=DURATION."""
    name, _ = obj.pool_ref(ref)
    pool = obj.lake().pool(name)
    settings = pool.ingest_settings(",".join(changes) or None)
    rows = [
        {"setting": "min-files", "value": str(settings.min_files)},
        {"setting": "max-files", "value": str(settings.max_files)},
        {"setting": "min-bytes", "value": format_size(settings.min_bytes)},
        {"setting": "max-bytes", "value": format_size(settings.max_bytes)},
        {"setting": "max-age", "value": f"{settings.max_age.total_seconds():g}s"},
    ]
    write_dicts(["setting", "value"], rows, obj.format(fmt))


COMMANDS = [ingest]
