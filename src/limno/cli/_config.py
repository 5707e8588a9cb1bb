"""``limno config get|set|unset|list``: the defaults kept in TOML config files.

The files and the precedence (flag > environment > the lake's file > the user's
file) are :mod:`limno.config`'s. ``set`` and ``unset`` write the user's file unless
``--scope lake`` names the lake's own (``<lake>/config.toml``, local lakes only).
"""

from __future__ import annotations

import click

from limno.cli._context import Context, format_option
from limno.cli._output import write_dicts
from limno.config import (
    KEYS,
    check_setting,
    lake_config_path,
    read_config,
    user_config_path,
    write_config,
)
from limno.errors import InvalidInputError, NotFoundError

__all__ = ["COMMANDS"]

_SCOPES = ("user", "lake")


@click.group()
def config() -> None:
    """Defaults in TOML config files: flag > environment > lake's file > user's file.

    \b
    Keys:
    """


config.help = (config.help or "") + "".join(f"  {k:<16} {v}\n" for k, v in KEYS.items())


def _check_name(key: str) -> None:
    if not key.startswith("spark.conf.") and key not in KEYS:
        check_setting(key, "")  # raises: unknown key, naming it


def _file(obj: Context, scope: str, key: str | None = None) -> str:
    if scope == "user":
        return user_config_path()
    path = lake_config_path(obj.location)
    if path is None:
        raise InvalidInputError(
            f"a lake's own config file is for local lakes only, not {obj.location}"
        )
    if key == "lake":
        raise InvalidInputError("'lake' is set in the user's config, not in the lake's")
    return path


def _complete_key(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of KEY: the config keys."""
    names = [k.replace("NAME", "") for k in KEYS]
    return [k for k in names if k.startswith(incomplete)]


_key_argument = click.argument("key", shell_complete=_complete_key)

_scope_option = click.option(
    "--scope",
    type=click.Choice(_SCOPES),
    default="user",
    show_default=True,
    help="Which file: the user's, or the lake's own (<lake>/config.toml).",
)


@config.command(name="get")
@_key_argument
@click.pass_obj
def get(obj: Context, key: str) -> None:
    """Print the value KEY has here (flag aside): environment, lake's file, user's file."""
    _check_name(key)
    found = obj.settings.origin(key)
    if found is None:
        raise NotFoundError(f"config key {key!r} is not set")
    click.echo(found[0])


@config.command(name="set")
@_scope_option
@_key_argument
@click.argument("value")
@click.pass_obj
def set_(obj: Context, scope: str, key: str, value: str) -> None:
    """Set KEY to VALUE in the user's config file (or the lake's, --scope lake)."""
    value = check_setting(key, value)
    path = _file(obj, scope, key)
    settings = read_config(path)
    settings[key] = value
    write_config(path, settings)
    click.echo(f"set {key} = {value} in {path}", err=True)


@config.command(name="unset")
@_scope_option
@_key_argument
@click.pass_obj
def unset(obj: Context, scope: str, key: str) -> None:
    """Remove KEY from the user's config file (or the lake's, --scope lake)."""
    _check_name(key)
    path = _file(obj, scope)
    settings = read_config(path)
    if settings.pop(key, None) is None:
        raise NotFoundError(f"config key {key!r} is not set in {path}")
    write_config(path, settings)
    click.echo(f"unset {key} in {path}", err=True)


@config.command(name="list")
@format_option
@click.option("--show-origin", is_flag=True, help="Also say where each value comes from.")
@click.pass_obj
def list_(obj: Context, fmt: str | None, show_origin: bool) -> None:
    """Every key set here, with its value (and, with --show-origin, its file or variable)."""
    names = ("key", "value", "origin") if show_origin else ("key", "value")
    rows = [
        {"key": k, "value": v, "origin": origin} if show_origin else {"key": k, "value": v}
        for k, (v, origin) in obj.settings.all().items()
    ]
    write_dicts(names, rows, obj.format(fmt))


COMMANDS = [config]
