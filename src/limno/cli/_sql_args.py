"""Where ``limno query`` reads its SQL: the argument, stdin (``-``), or ``--file PATH``.

SQL often starts with a ``--`` comment, which a command-line parser takes for an
option. An argument that starts with ``--`` and holds whitespace before anything
that names one of the command's options cannot be an option (no option name
holds whitespace), so :class:`SqlCommand` passes it on as the SQL argument.
``limno query -- "--..."`` works too, as with any command.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

import click

from limno.errors import InvalidInputError, os_reason

__all__ = ["SqlCommand", "read_sql", "sql_file_option"]


class SqlCommand(click.Command):
    """A command whose SQL argument may start with a ``--`` comment."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" not in args:
            names = {n for p in self.params for n in getattr(p, "opts", ())}
            sql = [a for a in args if _is_sql(a, names)]
            if sql:
                args = [a for a in args if not _is_sql(a, names)] + ["--", *sql]
        return super().parse_args(ctx, args)


def _is_sql(arg: str, options: set[str]) -> bool:
    if not arg.startswith("--"):
        return False
    head = re.split(r"\s", arg, maxsplit=1)
    return len(head) == 2 and head[0].split("=", 1)[0] not in options


def sql_file_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--file",
        "sql_file",
        metavar="PATH",
        default=None,
        help="Read the SQL from this file (- for stdin).",
    )(f)


def read_sql(sql: str | None, path: str | None) -> str:
    """The SQL text from the argument (``-``: stdin) or the file at ``path``."""
    if sql is not None and path is not None:
        raise InvalidInputError("query takes SQL as an argument or --file, not both")
    if path is None and sql is None:
        raise InvalidInputError("query needs SQL: an argument, - for stdin, or --file PATH")
    if path == "-" or sql == "-":
        text = sys.stdin.read()
    elif path is not None:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise InvalidInputError(
                f"cannot read SQL file {path}: {os_reason(e.errno, str(e))}"
            ) from None
        except UnicodeDecodeError:
            raise InvalidInputError(f"SQL file {path} is not UTF-8 text") from None
    else:
        text = sql or ""
    if not text.strip():
        raise InvalidInputError("the SQL is empty")
    return text
