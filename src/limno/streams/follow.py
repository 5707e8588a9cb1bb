"""Follow mode: a one-shot step run again each time the branches it reads move.

``limno etl --follow`` and ``limno kafka to --follow`` stay running in one process,
the way a CDC deployment runs them, instead of a new process per run (interpreter
start, imports, the lake opened, caches cold: most of a small run's time). Each run
is the one-shot command's run, unchanged: it is atomic and exactly once on its own
(an ETL run's output and completion records are one commit; ``kafka to`` resumes
after the last message the topic holds), so a crash at any moment of the loop and a
restart neither lose nor duplicate anything.

What triggers a run: the heads of the branches the step reads, looked at every
``interval`` seconds (a ref read each, well under a millisecond on a lake path;
between looks the loop sleeps on ``stop``, never spins). A run starts when they
differ from the heads read before the previous run (and once at the start), so a
commit that lands during a run triggers the next one; any writer's commit counts,
another process's or host's included. ``heads`` returning None means "not ready"
(an input pool not made yet): no run until it is.

Stopping: ``stop`` (SIGTERM, Ctrl-C) is looked at between runs, and a step may look
at it too (``kafka to`` stops producing, and flushes what it produced). A run in
progress ends the way a one-shot run ends, never half-committed. ``exit_after``:
return after that many seconds without a run that did something.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

__all__ = ["DEFAULT_INTERVAL", "follow"]

#: seconds between two looks at the heads
DEFAULT_INTERVAL = 0.2


def follow(
    heads: Callable[[], Hashable | None],
    step: Callable[[], bool],
    *,
    stop: threading.Event,
    interval: float = DEFAULT_INTERVAL,
    exit_after: float | None = None,
) -> int:
    """Run ``step`` whenever ``heads()`` changes (see the module docstring) until
    ``stop`` or ``exit_after`` seconds without a step that returned True; how many
    steps ran."""
    seen: Hashable | None = None
    runs = 0
    idle_since = time.monotonic()
    while not stop.is_set():
        now = heads()
        if now is not None and (runs == 0 or now != seen):
            seen = now
            runs += 1
            if step():
                idle_since = time.monotonic()
            continue  # look again at once: a commit may have landed during the run
        if exit_after is not None and time.monotonic() - idle_since >= exit_after:
            break
        stop.wait(max(0.001, interval))
    return runs
