"""``limno auth``: users, API keys, roles and per-pool grants.

Works on the lake through :meth:`limno.api.Lake.auth`: on a lake opened directly
it edits the lake's ``auth/`` journal (making keys needs ``LIMNO_AUTH_SECRET``, which
seals their secrets); against ``limno serve`` the server does it for an admin.
A key's secret is printed once, by ``create-user`` and ``create-key``, and never
by anything else.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from limno.cli._context import Context, format_option
from limno.cli._output import render_table, to_json, write_rows
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.api.auth_admin import AuthAdmin
    from limno.auth.model import NewKey
    from limno.pools import inspect
else:
    pa = lazy_module("pyarrow")  # the binary output formats only
    inspect = lazy_module("limno.pools.inspect")

__all__ = ["COMMANDS"]

ROLES = ("admin", "developer", "analyst")
LEVELS = ("none", "read", "write")


def _admin(obj: Context) -> AuthAdmin:
    return obj.lake().auth()


def _write_object(row: dict[str, Any], fmt: str) -> None:
    """One result as one JSON object (``json``, ``ndjson``), a one-row table, or the
    binary formats' one-row table."""
    out = sys.stdout.buffer
    if fmt == "json":
        out.write(json.dumps(row, indent=2).encode() + b"\n")
    elif fmt == "ndjson":
        out.write(to_json(row).encode() + b"\n")
    elif fmt == "table":
        out.write(render_table(list(row), [row]).encode())
    else:
        names = tuple(row)
        write_rows(inspect.Rows(names, [row], lambda: [pa.string()] * len(names)), fmt)
    out.flush()


def _key_row(new: NewKey, role: str | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"user": new.user}
    if role is not None:
        row["role"] = role
    row["access_key_id"] = new.access_key_id
    row["secret_access_key"] = new.secret_access_key
    return row


@click.group(name="auth")
def auth() -> None:
    """Users, API keys, roles (admin, developer, analyst) and per-pool grants."""


@auth.command(name="create-user")
@click.argument("name")
@click.option(
    "--role",
    required=True,
    type=click.Choice(ROLES, case_sensitive=False),
    help="admin: everything; developer: read/write all pools; analyst: read only.",
)
@click.option("--no-key", is_flag=True, help="Make no access key now (see create-key).")
@format_option
@click.pass_obj
def create_user(obj: Context, name: str, role: str, no_key: bool, fmt: str | None) -> None:
    """Create user NAME and its first access key (the secret is shown only now)."""
    user, new = _admin(obj).create_user(name, role.lower(), key=not no_key)
    if new is None:
        _write_object({"user": user.name, "role": user.role}, obj.format(fmt))
        click.echo(f"created user {user.name} ({user.role}) without a key", err=True)
        return
    _write_object(_key_row(new, user.role), obj.format(fmt))
    click.echo(
        f"created user {user.name} ({user.role}) with key {new.access_key_id};"
        " save the secret now: it is not shown again",
        err=True,
    )


@auth.command(name="delete-user")
@click.argument("name")
@click.pass_obj
def delete_user(obj: Context, name: str) -> None:
    """Delete user NAME and all of its keys."""
    user = _admin(obj).delete_user(name)
    click.echo(f"deleted user {user.name} ({user.role}) and its keys", err=True)


@auth.command(name="create-key")
@click.argument("user")
@format_option
@click.pass_obj
def create_key(obj: Context, user: str, fmt: str | None) -> None:
    """Create an access key for USER (the secret is shown only now)."""
    new = _admin(obj).create_key(user)
    _write_object(_key_row(new), obj.format(fmt))
    click.echo(
        f"created key {new.access_key_id} for {new.user};"
        " save the secret now: it is not shown again",
        err=True,
    )


@auth.command(name="delete-key")
@click.argument("key_id", metavar="ID")
@click.pass_obj
def delete_key(obj: Context, key_id: str) -> None:
    """Delete access key ID: requests signed with it fail from now on."""
    key = _admin(obj).delete_key(key_id)
    click.echo(f"deleted key {key.id} of {key.user}", err=True)


@auth.command()
@click.argument("user")
@click.argument("pool")
@click.argument("level", type=click.Choice(LEVELS, case_sensitive=False))
@click.pass_obj
def grant(obj: Context, user: str, pool: str, level: str) -> None:
    """Set USER's access to POOL: none, read or write, whatever the role says."""
    granted = _admin(obj).grant(user, pool, level.lower())
    click.echo(f"granted {granted.level} on pool {granted.pool} to {granted.user}", err=True)


@auth.command()
@click.argument("user")
@click.argument("pool")
@click.pass_obj
def revoke(obj: Context, user: str, pool: str) -> None:
    """Remove USER's grant on POOL (the role decides again)."""
    removed = _admin(obj).revoke(user, pool)
    click.echo(
        f"revoked {removed.level} on pool {removed.pool or removed.pool_id} from {removed.user}",
        err=True,
    )


_LS = ("user", "role", "created", "keys", "grants")


def _ls_types() -> list[pa.DataType]:
    grant_type = pa.struct(
        [("pool", pa.string()), ("pool_id", pa.string()), ("level", pa.string())]
    )
    return [pa.string(), pa.string(), pa.string(), pa.list_(pa.string()), pa.list_(grant_type)]


@auth.command(name="ls")
@click.argument("user", required=False)
@format_option
@click.pass_obj
def ls(obj: Context, user: str | None, fmt: str | None) -> None:
    """List users (or USER): role, key ids and grants. Secrets are never listed."""
    admin = _admin(obj)
    users = [admin.user(user)] if user else admin.users()
    keys: dict[str, list[str]] = {}
    for key in admin.access_keys(user):
        keys.setdefault(key.user, []).append(key.id)
    grants: dict[str, list[dict[str, str]]] = {}
    for g in admin.grants(user):
        grants.setdefault(g.user, []).append(
            {"pool": g.pool, "pool_id": g.pool_id, "level": g.level}
        )
    rows: list[dict[str, Any]] = [
        {
            "user": u.name,
            "role": u.role,
            "created": u.created,
            "keys": keys.get(u.name, []),
            "grants": grants.get(u.name, []),
        }
        for u in users
    ]
    fmt = obj.format(fmt)
    if fmt == "table":  # lists as short text for people
        for row in rows:
            row["keys"] = ", ".join(row["keys"])
            row["grants"] = ", ".join(
                f"{g['pool'] or g['pool_id']}:{g['level']}" for g in row["grants"]
            )
    write_rows(inspect.Rows(_LS, rows, _ls_types), fmt)


COMMANDS = [auth]
