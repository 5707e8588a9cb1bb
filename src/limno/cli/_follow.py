"""What the long-running commands share: stopping on signals, and the ``--follow``
options of ``limno etl`` and ``limno kafka to`` (:mod:`limno.streams.follow`)."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

import click

from limno.cli._context import DURATION
from limno.errors import InvalidInputError
from limno.streams.follow import DEFAULT_INTERVAL

__all__ = ["FollowArgs", "err_line", "follow_options", "print_line", "stop_on_signals"]

F = TypeVar("F", bound=Callable[..., None])


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and Ctrl-C set ``stop``: the command ends what it is doing the way it
    ends anyway (a commit or a run is never cut) and exits 0 (main thread only: tests
    call in-process). Every wait of a long-running command ends when ``stop`` is set
    (an event stream read from a server is cut by :mod:`limno.api.remote_events`), so
    no exception is ever raised into the main thread at an arbitrary bytecode: one
    that landed in a finalizer (an HTTP stream's generator collected) was printed as
    an "Exception ignored in" traceback.

    The handler never calls ``stop.set()`` itself: it runs in the main thread between
    two bytecodes, possibly while that thread holds the event's own lock (inside
    ``stop.wait``), and would deadlock on it. It writes a byte to a pipe instead (no
    lock taken), and a thread started here sets the event."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read_end, write_end = os.pipe()

    def relay() -> None:
        if os.read(read_end, 1) == b"s":
            stop.set()

    def handler(signum: int, frame: object) -> None:
        os.write(write_end, b"s")

    thread = threading.Thread(target=relay, name="limno-signals", daemon=True)
    thread.start()
    signals = (signal.SIGTERM, signal.SIGINT)
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
        os.write(write_end, b"q")  # ends the relay if no signal came (else a no-op)
        thread.join()
        os.close(read_end)
        os.close(write_end)


def print_line(text: str) -> None:
    """One line on stdout, at once (a pipe's reader sees each run as it ends)."""
    click.echo(text)
    sys.stdout.flush()


def err_line(text: str) -> None:
    """A line on stderr (a run's summary, a log line)."""
    click.echo(text, err=True)


class FollowArgs:
    """``--follow``, ``--exit-after`` and ``--interval`` as given, checked together."""

    def __init__(
        self, follow: bool, exit_after: dt.timedelta | None, interval: dt.timedelta | None
    ) -> None:
        if not follow and (exit_after is not None or interval is not None):
            raise InvalidInputError("--exit-after and --interval need --follow")
        self.on = follow
        self.exit_after = None if exit_after is None else exit_after.total_seconds()
        self.interval = (
            DEFAULT_INTERVAL if interval is None else max(0.01, interval.total_seconds())
        )


def follow_options(what: str) -> Callable[[F], F]:
    """The three options; the command gets them as ``follow``, ``exit_after`` and
    ``interval`` (make a :class:`FollowArgs` of them). ``what``: what a run waits for."""
    follow = click.option(
        "--follow",
        is_flag=True,
        help=f"Keep running: run again whenever {what} gets a new commit (by any writer),"
        " one line per run on stdout; SIGTERM or Ctrl-C ends it after the run in progress"
        " (exit 0).",
    )
    exit_after = click.option(
        "--exit-after",
        type=DURATION,
        default=None,
        help="With --follow: stop after this long without a run that did something"
        " (default: run until interrupted).",
    )
    interval = click.option(
        "--interval",
        type=DURATION,
        default=None,
        help="With --follow: how often to look for new commits (default 200ms).",
    )

    def decorate(f: F) -> F:
        return follow(exit_after(interval(f)))

    return decorate
