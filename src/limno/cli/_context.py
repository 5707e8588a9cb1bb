"""What every command shares: the lake it works on, its options, and how values parse.

Commands reach the lake only through the lake interface (:mod:`limno.api`), so
each works the same on a lake in this process and, next, behind ``limno serve``.
Option values are parsed once, by click parameter types, in one notation:
sizes and durations as :mod:`limno.units` defines them, ``KEY=VALUE`` pairs,
ISO 8601 times, ``POOL[@REF]`` refs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import click

from limno.cli._output import FORMATS, default_format
from limno.cli._state import working_ref
from limno.config import Settings
from limno.errors import InvalidInputError, LimnoError
from limno.lazy import lazy_module
from limno.units import parse_duration, parse_size

if TYPE_CHECKING:
    from limno import api
    from limno.api import Engine, Lake
    from limno.core import refs
else:
    # the lake, opened on demand: ``--help`` and usage errors never load it
    api = lazy_module("limno.api")
    refs = lazy_module("limno.core.refs")

__all__ = [
    "DURATION",
    "KEY_VALUE",
    "SIZE",
    "TIME",
    "Context",
    "engine_options",
    "format_option",
    "meta_option",
    "pool_option",
]

F = Callable[..., Any]


@dataclass
class Context:
    """What every command gets: the lake location (opened on demand), output format."""

    location: str
    fmt: str | None = None
    _lake: Lake | None = None
    _settings: Settings | None = None

    def lake(self) -> Lake:
        if self._lake is None:
            self._lake = api.Lake.open(self.location)
        return self._lake

    @property
    def settings(self) -> Settings:
        """Defaults from the environment and the config files (limno.config)."""
        if self._settings is None:
            self._settings = Settings(self.location)
        return self._settings

    def format(self, local: str | None = None) -> str:
        return self.chosen_format(local) or default_format()

    def chosen_format(self, local: str | None = None) -> str | None:
        """The format asked for: ``-f`` (the command's, the global one), else
        ``LIMNO_FORMAT``, else the config files; None when nothing chose one."""
        return local or self.fmt or self.settings.get("format")

    def listing_format(self, local: str | None = None) -> str | None:
        """The format of a listing that has plain lines of its own (``branch``, ``tag``,
        ``vacuum``, ``spark status``): the chosen one, else table on a terminal, else
        None (the plain lines: what scripts read before ``-f`` applied to them)."""
        chosen = self.chosen_format(local)
        if chosen is None and default_format() == "table":
            return "table"
        return chosen

    def engine(self, flag: Engine | None) -> Engine:
        """``--engine``, else ``LIMNO_ENGINE``, else the config files, else auto."""
        return flag or cast("Engine", self.settings.get("engine") or "auto")

    def spark(
        self, master: str | None, conf: Sequence[tuple[str, str]] = ()
    ) -> tuple[str | None, dict[str, str]]:
        """The Spark master and conf of a new session: flags over the environment over
        the config files (None: the engine's own default)."""
        return master or self.settings.get("spark.master"), {
            **self.settings.spark_conf(),
            **dict(conf),
        }

    def lake_spark(
        self, master: str | None, conf: Sequence[tuple[str, str]] = ()
    ) -> tuple[str | None, dict[str, str]]:
        """:meth:`spark` for work the lake runs (``load``, ``query``). Through a server
        only the flags are sent: the environment and config files set this machine's
        sessions, while the server runs its own Spark (a non-admin's flags get a 403)."""
        if self.location.startswith(("http://", "https://")):
            return master, dict(conf)
        return self.spark(master, conf)

    def pool_ref(self, ref: str | None) -> tuple[str, str | None]:
        """``(pool, ref)`` from ``-p POOL[@REF]``, else from ``limno use``."""
        text = ref or working_ref(self.lake().uri)
        if not text:
            raise InvalidInputError("no pool given: pass -p POOL[@REF] or run 'limno use POOL'")
        return refs.parse_pool_ref(text)

    def branch_ref(self, ref: str | None) -> tuple[str, str]:
        """``(pool, branch)`` for commands that write (default branch ``main``)."""
        pool, at = self.pool_ref(ref)
        return pool, at or "main"


# -- parameter types: a value is parsed once, where click reads it --------------------------


class _Parsed(click.ParamType):
    """A click type from a parsing function that raises LimnoError on bad input."""

    def __init__(self, name: str, parse: Callable[[str], Any]) -> None:
        self.name = name
        self._parse = parse

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self._parse(value)
        except LimnoError as e:
            self.fail(str(e), param, ctx)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise InvalidInputError(f"expected KEY=VALUE, not {text!r}")
    return key, value


def _time(text: str) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError as e:
        raise InvalidInputError(f"invalid time {text!r} (use ISO 8601)") from e
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _positive_size(text: str) -> int:
    size = parse_size(text)
    if size <= 0:
        raise InvalidInputError(f"size must be positive, not {text!r}")
    return size


#: ``256MiB``, ``1GB``: bytes (limno.units)
SIZE = _Parsed("size", _positive_size)
#: ``15m``, ``1d12h``: a timedelta (limno.units)
DURATION = _Parsed("duration", parse_duration)
#: ``KEY=VALUE``: a pair
KEY_VALUE = _Parsed("key=value", _key_value)
#: ISO 8601, naive times in UTC
TIME = _Parsed("time", _time)


# -- options shared by several commands ------------------------------------------------------


def pool_option(f: F) -> F:
    return click.option(
        "-p", "--pool", "ref", default=None, help="POOL[@REF] (default: limno use)."
    )(f)


def format_option(f: F) -> F:
    return click.option(
        "-f", "--format", "fmt", type=click.Choice(FORMATS), default=None, help="Output format."
    )(f)


def meta_option(f: F) -> F:
    return click.option(
        "--meta",
        multiple=True,
        type=KEY_VALUE,
        help="KEY=VALUE stored on the commit (repeatable).",
    )(f)


def engine_options(f: F) -> F:
    """``--engine`` and the Spark session options of ``load`` and ``query``."""
    f = click.option(
        "--spark-conf",
        "spark_conf",
        multiple=True,
        type=KEY_VALUE,
        help="KEY=VALUE Spark setting for a new session (repeatable).",
    )(f)
    f = click.option(
        "--spark-master",
        default=None,
        help="Spark master URL (default: $LIMNO_SPARK_MASTER, else the config's, else local[*]).",
    )(f)
    return click.option(
        "--engine",
        type=click.Choice(["local", "spark", "auto"]),
        default=None,
        help="Where to run: auto is Spark from $LIMNO_SPARK_THRESHOLD (1GiB) of data on"
        " (default: $LIMNO_ENGINE, else the config's engine, else auto).",
    )(f)
