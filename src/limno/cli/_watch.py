"""``limno watch [POOL]``: print the lake's events as they happen, one line each.

The events come from the lake's journals (:mod:`limno.pools.events`), so changes
made by any process show up. Each line is flushed as it is written, so a pipe
reader sees it at once; Ctrl-C and SIGTERM end the command with exit 0 (watching
has no failure to report when it is stopped).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

from limno.cli._context import DURATION, Context, format_option
from limno.cli._follow import stop_on_signals
from limno.cli._output import to_json
from limno.errors import InvalidInputError

if TYPE_CHECKING:
    import datetime as dt

    from limno.api import Lake
    from limno.pools.events import Event

__all__ = ["COMMANDS"]

#: formats a stream can be written in: one JSON object per line, or one text line
_STREAMING = ("table", "ndjson", "json")


def _line(event: Event, fmt: str) -> str:
    if fmt != "table":
        return to_json(event.to_json())
    when = event.time[:19].replace("T", " ")
    summary = event.summary().replace("\n", "\\n")  # a commit message's lines: one line
    return f"{when}  {event.type:<14}  {event.pool or '-':<16}  {summary}"


@click.command()
@click.argument("pool", required=False)
@click.option("--from-start", is_flag=True, help="Tell every event from the lake's start first.")
@click.option("--after", "after", metavar="ID", default=None, help="Resume after event ID.")
@click.option("--exit-after", type=click.IntRange(min=1), default=None, help="Stop after N events.")
@click.option(
    "--timeout",
    type=DURATION,
    default=None,
    help="Stop this long after the earlier events are told (e.g. 30s).",
)
@click.option(
    "--interval",
    type=DURATION,
    default="0.5s",
    show_default=True,
    help="How often to look for new events.",
)
@format_option
@click.pass_obj
def watch(
    obj: Context,
    pool: str | None,
    from_start: bool,
    after: str | None,
    exit_after: int | None,
    timeout: dt.timedelta | None,
    interval: dt.timedelta,
    fmt: str | None,
) -> None:
    """Print live events: pools, branches, tags, commits, jobs (of POOL, or all).

    Only new events by default; --from-start or --after ID to tell earlier ones.
    """
    if from_start and after:
        raise InvalidInputError("give --from-start or --after, not both")
    out = obj.format(fmt)
    if out not in _STREAMING:
        raise InvalidInputError(f"watch writes table or ndjson lines, not {out!r}")
    stop = threading.Event()
    timer = None
    if timeout is not None:
        timer = threading.Timer(timeout.total_seconds(), stop.set)
        timer.daemon = True
    seconds = max(interval.total_seconds(), 0.01)
    told = 0
    try:
        with stop_on_signals(stop):  # every wait below ends when stop is set
            start = None if from_start else (after or "now")
            events = _told(obj.lake(), pool, start, stop, seconds, timer)
            for event in events:
                sys.stdout.write(_line(event, out) + "\n")
                sys.stdout.flush()
                told += 1
                if exit_after is not None and told >= exit_after:
                    break
    except KeyboardInterrupt:  # before the handlers were installed
        pass
    finally:
        if timer is not None:
            timer.cancel()


def _told(
    lake: Lake,
    pool: str | None,
    start: str | None,
    stop: threading.Event,
    seconds: float,
    timer: threading.Timer | None,
) -> Iterator[Event]:
    """The events to tell: those the lake holds after ``start`` first (not ``"now"``),
    whole whatever ``--timeout`` says (a slow server still tells them all), then new
    ones as they come, the timer started once the earlier ones are told."""
    last = start
    if start != "now":
        for event in lake.events(pool, start, follow=False, stop=stop):
            last = event.id
            yield event
    if timer is not None:
        timer.start()
    yield from lake.events(pool, last, stop=stop, poll_interval=seconds)


COMMANDS = [watch]
