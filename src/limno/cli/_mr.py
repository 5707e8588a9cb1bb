"""``limno mr``: merge requests (pull requests) of a pool, and compare.

\b
limno mr open -p POOL SOURCE [--into BRANCH] -t TITLE [-d DESC]
limno mr ls -p POOL [--state open|merged|closed|all]
limno mr show -p POOL ID
limno mr merge -p POOL ID [--strategy fail|source-wins|dest-wins]
limno mr close -p POOL ID
limno mr compare -p POOL SOURCE [--into BRANCH] [--sample]

Compare is a subcommand here, beside the requests it previews (``limno diff`` is the
plain diff of two refs). See :mod:`limno.pools.reviews`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from limno.cli._context import Context, format_option, pool_option
from limno.cli._output import write_dicts, write_rows
from limno.core.merge import STRATEGIES
from limno.lazy import lazy_module

if TYPE_CHECKING:
    from limno.api.base_versioned import VersionedPool
    from limno.pools import inspect
    from limno.pools.review_compare import Comparison
    from limno.pools.reviews import MergeRequest
else:
    inspect = lazy_module("limno.pools.inspect")

__all__ = ["COMMANDS"]

LIST_COLUMNS = ("id", "state", "title", "source", "into", "author", "created", "commit")
SHOW_COLUMNS = (
    *LIST_COLUMNS,
    "description",
    "strategy",
    "done_at",
    "done_by",
    "attempts",
    "outcome",
    "verdicts",
)


def _row(mr: MergeRequest) -> dict[str, Any]:
    """A request as one flat row (the same columns in every format)."""
    last = mr.attempts[-1] if mr.attempts else None
    said = [
        f"{v.event} {v.hook}: {v.verdict}" + (f" ({v.reason})" if v.reason else "")
        for v in mr.verdicts
    ]
    row = {name: getattr(mr, name, None) for name in SHOW_COLUMNS[:-3]}
    row["attempts"] = len(mr.attempts)
    row["outcome"] = None if last is None else f"{last.outcome}: {last.message}"
    row["verdicts"] = "; ".join(said)
    return row


def _pool(obj: Context, ref: str | None) -> tuple[VersionedPool, str | None]:
    name, at = obj.pool_ref(ref)
    return obj.lake().versioned_pool(name), at


def _write_one(obj: Context, fmt: str | None, mr: MergeRequest, plain: str | None) -> None:
    """A changed request: its row in the format asked for, else the ``plain`` line."""
    chosen = obj.chosen_format(fmt)
    if chosen is None:
        if plain:
            click.echo(plain)
        return
    write_dicts(SHOW_COLUMNS, [_row(mr)], chosen)


@click.group()
def mr() -> None:
    """Merge requests: propose, review (compare) and merge a branch, pull-request style."""


@mr.command(name="open")
@pool_option
@format_option
@click.option("--into", default=None, help="Destination branch (default: -p's branch or main).")
@click.option("-t", "--title", required=True, help="What the merge request does.")
@click.option("-d", "--description", default="", help="Why, and anything reviewers need.")
@click.option("--author", default=None)
@click.argument("source")
@click.pass_obj
def open_(
    obj: Context,
    ref: str | None,
    fmt: str | None,
    into: str | None,
    title: str,
    description: str,
    author: str | None,
    source: str,
) -> None:
    """Open a merge request of SOURCE into a branch; prints its id."""
    pool, at = _pool(obj, ref)
    dest = into or at or "main"
    made = pool.open_merge_request(source, dest, title, description, author)
    _write_one(obj, fmt, made, made.id)
    click.echo(f"opened merge request {made.id}: {source} into {pool.name}@{dest}", err=True)


@mr.command(name="ls")
@pool_option
@format_option
@click.option(
    "--state",
    type=click.Choice(["open", "merged", "closed", "all"]),
    default="open",
    show_default=True,
)
@click.pass_obj
def ls(obj: Context, ref: str | None, fmt: str | None, state: str) -> None:
    """List merge requests, newest first."""
    pool, _ = _pool(obj, ref)
    rows = [{k: _row(m)[k] for k in LIST_COLUMNS} for m in pool.merge_requests(state)]
    write_dicts(LIST_COLUMNS, rows, obj.format(fmt))


@mr.command()
@pool_option
@format_option
@click.argument("mr_id", metavar="ID")
@click.pass_obj
def show(obj: Context, ref: str | None, fmt: str | None, mr_id: str) -> None:
    """A merge request: state, outcome, the hooks' verdicts of its last merge attempt."""
    pool, _ = _pool(obj, ref)
    write_dicts(SHOW_COLUMNS, [_row(pool.merge_request(mr_id))], obj.format(fmt))


@mr.command(name="merge")
@pool_option
@format_option
@click.option("--strategy", type=click.Choice(STRATEGIES), default="fail", show_default=True)
@click.option("--author", default=None)
@click.argument("mr_id", metavar="ID")
@click.pass_obj
def merge_(
    obj: Context, ref: str | None, fmt: str | None, strategy: str, author: str | None, mr_id: str
) -> None:
    """Merge a merge request (the pool's merge, with STRATEGY); prints the commit."""
    pool, _ = _pool(obj, ref)
    done = pool.merge_merge_request(mr_id, strategy, author)
    _write_one(obj, fmt, done, done.commit)
    click.echo(
        f"merged merge request {done.id}: {done.source} into {pool.name}@{done.into}"
        f" ({done.commit})",
        err=True,
    )


@mr.command()
@pool_option
@format_option
@click.option("--author", default=None)
@click.argument("mr_id", metavar="ID")
@click.pass_obj
def close(obj: Context, ref: str | None, fmt: str | None, author: str | None, mr_id: str) -> None:
    """Close a merge request without merging it."""
    pool, _ = _pool(obj, ref)
    done = pool.close_merge_request(mr_id, author)
    _write_one(obj, fmt, done, None)
    click.echo(f"closed merge request {done.id}", err=True)


@mr.command()
@pool_option
@format_option
@click.option("--into", default=None, help="Destination branch (default: -p's branch or main).")
@click.option("--rows", type=click.IntRange(0, 1000), default=10, show_default=True)
@click.option("--sample", is_flag=True, help="Print the sampled rows instead of the objects.")
@click.argument("source")
@click.pass_obj
def compare(
    obj: Context,
    ref: str | None,
    fmt: str | None,
    into: str | None,
    rows: int,
    sample: bool,
    source: str,
) -> None:
    """What merging SOURCE into a branch would bring (the objects or paths it changed
    since the merge base) and the conflicts it would meet; nothing is written."""
    pool, at = _pool(obj, ref)
    dest = into or at or "main"
    found = pool.compare(source, dest, rows=rows)
    chosen = obj.format(fmt)
    if sample:
        _write_sample(found, chosen)
    elif pool.kind == "files":
        from limno.cli._fs import CHANGE_COLUMNS, diff_rows

        write_dicts(CHANGE_COLUMNS, diff_rows(found.entries), chosen)
    else:
        write_rows(inspect.diff_rows(found.entries), chosen)
    click.echo(_summary(found), err=True)


def _write_sample(found: Comparison, fmt: str) -> None:
    names: list[str] = ["_change", "_object"]
    out = []
    for s in found.sample:
        for r in s.rows:
            names.extend(k for k in r if k not in names)
            out.append({"_change": s.change, "_object": s.object, **r})
    write_dicts(names, out, fmt)


def _summary(c: Comparison) -> str:
    counts = ", ".join(f"{n} {change}" for change, n in c.counts.items())
    more = " (first entries only)" if c.truncated else ""
    line = f"{c.pool}: {c.source} into {c.dest}: {c.kind}, {counts}{more}"
    if c.conflicts:
        line += f"; {len(c.conflicts)} conflict(s): {', '.join(c.conflicts)}"
        line += " (merge with --strategy source-wins or dest-wins)"
    return line


COMMANDS = [mr]
