"""``limno index create|drop|ls``: search indexes on non-key fields.

Creating and dropping an index are commits (their id on stdout, a summary on stderr);
``limno get --field F VALUE...`` (in :mod:`limno.cli._data`) uses them.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from limno.cli._context import Context, format_option, pool_option
from limno.cli._output import write_tables
from limno.cli._progress import activity

__all__ = ["COMMANDS"]


@click.group()
def index() -> None:
    """Search indexes on non-key fields (limno get --field F VALUE uses them)."""


@index.command(name="create")
@pool_option
@click.option("-m", "--message", default="", help="Commit message.")
@click.option("--author", default=None, help="Commit author (default: the current user).")
@click.argument("fields", nargs=-1, required=True)
@click.pass_obj
def index_create(
    obj: Context, ref: str | None, message: str, author: str | None, fields: Sequence[str]
) -> None:
    """Index FIELDS (dotted paths) on a branch: one commit; every object gets a sidecar."""
    name, branch = obj.branch_ref(ref)
    pool = obj.lake().pool(name)
    with activity(f"indexing {pool.name}@{branch}"):
        made = pool.create_index(list(fields), branch, message, author)
    click.echo(made.id)
    click.echo(f"indexed {', '.join(fields)} on {pool.name}@{branch}", err=True)


@index.command(name="drop")
@pool_option
@click.option("-m", "--message", default="", help="Commit message.")
@click.option("--author", default=None, help="Commit author (default: the current user).")
@click.argument("fields", nargs=-1, required=True)
@click.pass_obj
def index_drop(
    obj: Context, ref: str | None, message: str, author: str | None, fields: Sequence[str]
) -> None:
    """Drop the indexes on FIELDS from a branch: one commit (vacuum frees the bytes)."""
    name, branch = obj.branch_ref(ref)
    pool = obj.lake().pool(name)
    made = pool.drop_index(list(fields), branch, message, author)
    click.echo(made.id)
    click.echo(f"dropped the index on {', '.join(fields)} from {pool.name}@{branch}", err=True)


@index.command(name="ls")
@pool_option
@format_option
@click.pass_obj
def index_ls(obj: Context, ref: str | None, fmt: str | None) -> None:
    """The search indexes of a ref: field, id, created (the meta table "POOL:indexes")."""
    name, at = obj.pool_ref(ref)
    write_tables([obj.lake().pool(name).meta_table("indexes", at)], obj.format(fmt))


COMMANDS = [index]
