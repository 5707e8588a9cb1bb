"""How long a query may run and how large its answer may be.

A query from someone else (a server's caller) must not hold a core or fill the
server's memory for as long as it likes, so it runs under :class:`QueryLimits`:

* ``timeout``: seconds from the start of the query (registering the tables it
  names included). The local engine stops DuckDB at the limit by interrupting
  its connection (:class:`Watchdog`); the query then fails with
  :class:`~limno.errors.QueryTimeoutError`. Work limno does in Python before
  DuckDB runs (merging overlapping objects) is not interrupted, but the query
  fails as soon as DuckDB starts. Spark queries do not apply a timeout.
* ``max_rows`` / ``max_bytes``: the answer's rows and its size in memory (Arrow
  buffers, what a server holds before it writes a response). The local engine
  reads the answer in batches and stops at the first batch past a limit, so a
  huge answer is never held whole; Spark limits the rows it collects to
  ``max_rows + 1``. Past a limit the query fails with
  :class:`~limno.errors.ResultTooLargeError`: a truncated answer would look
  complete.

``None`` means unlimited, the default for SQL run in-process. A server holds its
own caps and lets a caller only lower them (:meth:`QueryLimits.within`). This
module imports no engine: the API and the CLI use it at start-up.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TypeVar

from limno.errors import InvalidInputError, QueryTimeoutError, ResultTooLargeError
from limno.units import format_size

__all__ = ["QueryLimits", "Watchdog"]

_N = TypeVar("_N", int, float)

#: how often a fired watchdog interrupts again (a query may start after the first one)
_REPEAT = 0.05


@dataclass(frozen=True)
class QueryLimits:
    """A query's time limit (seconds) and answer limits (rows, bytes); None: no limit."""

    timeout: float | None = None
    max_rows: int | None = None
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.timeout is not None and not (self.timeout > 0 and math.isfinite(self.timeout)):
            raise InvalidInputError(f"query timeout must be a positive number, not {self.timeout}")
        for name in ("max_rows", "max_bytes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value <= 0):
                raise InvalidInputError(f"query {name} must be a positive integer, not {value}")

    @property
    def unlimited(self) -> bool:
        """Whether no limit is set."""
        return self.timeout is None and self.max_rows is None and self.max_bytes is None

    def within(self, cap: QueryLimits) -> QueryLimits:
        """These limits, each no looser than ``cap``'s (a caller may lower a server's)."""
        return QueryLimits(
            timeout=_lower(self.timeout, cap.timeout),
            max_rows=_lower(self.max_rows, cap.max_rows),
            max_bytes=_lower(self.max_bytes, cap.max_bytes),
        )

    def check_answer(self, rows: int, nbytes: int) -> None:
        """Raise ResultTooLargeError if an answer (so far) of ``rows`` and ``nbytes`` is
        past a limit."""
        if self.max_rows is not None and rows > self.max_rows:
            raise ResultTooLargeError(
                f"SQL: the answer has more than {self.max_rows} rows (the limit);"
                " narrow the query (WHERE, LIMIT) or set a higher limit with --max-rows N"
            )
        if self.max_bytes is not None and nbytes > self.max_bytes:
            raise ResultTooLargeError(
                f"SQL: the answer is larger than {format_size(self.max_bytes)} (the limit);"
                " select fewer rows or columns or set a higher limit with --max-bytes SIZE"
            )

    def timed_out(self) -> QueryTimeoutError:
        """The error of a query stopped at :attr:`timeout`."""
        return QueryTimeoutError(
            f"SQL: the query was stopped at its time limit of {self.timeout:g}s;"
            " set a longer one with --timeout SECONDS"
        )


def _lower(mine: _N | None, cap: _N | None) -> _N | None:
    if mine is None:
        return cap
    if cap is None:
        return mine
    return min(mine, cap)


class Watchdog:
    """Calls ``interrupt`` once ``timeout`` seconds have passed, and again every 50 ms
    until the ``with`` block ends (an interrupt that comes between two statements
    is lost, so it is repeated); :attr:`fired` tells whether it did.

    ``timeout`` None: it never fires. The block's end waits for the thread, so
    ``interrupt`` is never called after it (the connection may be closed then).
    """

    def __init__(self, timeout: float | None, interrupt: Callable[[], None]) -> None:
        self._timeout = timeout
        self._interrupt = interrupt
        self._done = threading.Event()
        self._fired = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def fired(self) -> bool:
        """Whether the time limit was reached."""
        return self._fired.is_set()

    def __enter__(self) -> Watchdog:
        if self._timeout is not None:
            self._thread = threading.Thread(target=self._run, name="limno-query-timeout")
            self._thread.daemon = True
            self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        assert self._timeout is not None
        if self._done.wait(self._timeout):
            return
        self._fired.set()
        while True:
            self._interrupt()
            if self._done.wait(_REPEAT):
                return
