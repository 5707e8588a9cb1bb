"""Progress on stderr for long work (load, compact, vacuum, verify), on a terminal only.

The bar is drawn with ``rich``, imported only when stderr is a terminal: in pipes,
scripts and tests stderr holds the summary lines alone. The lake interface
(:mod:`limno.api`) reports no progress, so the bars show what the CLI can see
for itself:

- ``load``: the bytes read so far of the input files, against their sizes (with the
  rate and the time left), from the read positions of the files this process has
  open (``/proc/self/fdinfo``; where there is none, elapsed time only);
- ``verify``: the pools checked, against the number of pools;
- ``compact`` and ``vacuum``: elapsed time (nothing to count from outside).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["activity", "counting", "reading"]

Update = Callable[[int], None]


def _on_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def _bar(label: str, total: int | None, unit: str) -> Iterator[Update]:
    """A transient bar (it is erased when the work ends, before the summary line)."""
    if not _on_terminal():
        yield lambda done: None
        return
    from rich import progress as rp
    from rich.console import Console
    from rich.text import Text

    class Rate(rp.ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{speed:,.1f} {unit}/s")

    columns: list[Any] = [rp.SpinnerColumn(), rp.TextColumn(label)]
    if total is not None and unit == "bytes":
        columns += [rp.BarColumn(), rp.DownloadColumn(), rp.TransferSpeedColumn()]
        columns += [rp.TimeRemainingColumn()]
    elif total is not None:
        columns += [rp.BarColumn(), rp.MofNCompleteColumn(), rp.TextColumn(unit), Rate()]
    columns.append(rp.TimeElapsedColumn())
    console = Console(file=sys.stderr)
    with rp.Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda done: bar.update(task, completed=done)


@contextlib.contextmanager
def activity(label: str) -> Iterator[None]:
    """A spinner and the elapsed time, for work nothing outside it can count."""
    with _bar(label, None, ""):
        yield


@contextlib.contextmanager
def counting(label: str, total: int, unit: str) -> Iterator[Update]:
    """A bar of ``total`` items (``unit``: their name); call the update with the count."""
    with _bar(label, total, unit) as update:
        yield update


@contextlib.contextmanager
def reading(label: str, paths: Sequence[str]) -> Iterator[None]:
    """A bar of the bytes this process has read of the files ``paths`` (``-``: stdin,
    which has no size: then elapsed time only)."""
    if not _on_terminal():
        yield
        return
    files = [p for p in paths if p != "-" and os.path.isfile(p)]
    total = sum(os.path.getsize(p) for p in files)
    if len(files) != len(paths) or not os.path.isdir("/proc/self/fdinfo"):
        with activity(label):
            yield
        return
    with _bar(label, total, "bytes") as update:
        stop = threading.Event()
        watcher = threading.Thread(
            target=_watch_reads, args=({os.path.realpath(p) for p in files}, update, stop)
        )
        watcher.daemon = True
        watcher.start()
        try:
            yield
        finally:
            stop.set()
            watcher.join()
        update(total)


def _watch_reads(targets: set[str], update: Update, stop: threading.Event) -> None:
    """Until ``stop``: the sum of the furthest read position of each target file."""
    furthest: dict[str, int] = {}
    while not stop.wait(0.1):
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
                if target not in targets:
                    continue
                with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as info:
                    pos = int(info.readline().split()[1])  # "pos:\t<offset>"
            except (OSError, ValueError, IndexError):
                continue  # closed meanwhile
            furthest[target] = max(furthest.get(target, 0), pos)
        update(sum(furthest.values()))
