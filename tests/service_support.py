"""What the tests' server processes (Kafka, Kafka Connect, PostgreSQL) share.

Each of them is started the same way: on a loopback port found free (started again on
another should the port be taken before the server binds it: :func:`on_free_port`), as
a process of its own session (:func:`spawn`: Ctrl-C of ``make kafka`` or a test run
reaches it only through :meth:`Service.stop`, which always reaps it) writing to one log
file, and then waited for until it answers, with a bound, failing at once with the tail
of its log should it exit first (:func:`started`). A subclass is a dataclass of its own
address fields plus ``proc`` and ``directory``, so its fields keep their order.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

__all__ = ["PORT_TRIES", "Service", "bind", "free_port", "on_free_port", "spawn", "started"]

#: starts in all when a port found free was taken before the server bound it
PORT_TRIES = 3

S = TypeVar("S", bound="Service")


def bind(port: int = 0) -> int | None:
    """``port`` (0: any free one) if a loopback socket can take it now, else None."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return None
        return int(s.getsockname()[1])


def free_port() -> int:
    """A loopback port free now (only now: see :func:`on_free_port`)."""
    found = bind()
    assert found is not None, "no free loopback port"
    return found


class Service:
    """A server process running in ``directory``, its output in :attr:`log`.

    Not a dataclass itself: each subclass is one, listing ``proc`` and ``directory``
    after its own leading fields (their positional order predates this base)."""

    proc: subprocess.Popen[bytes]
    directory: Path
    #: the name in messages ("kafka exited with code 1")
    name: ClassVar[str]
    #: the log's file name in ``directory``
    log_name: ClassVar[str]
    #: what asks the server to shut down (PostgreSQL: SIGINT, its fast shutdown)
    stop_signal: ClassVar[int] = signal.SIGTERM
    #: how long a server told to stop may take to exit before it is killed
    stop_timeout: ClassVar[float] = 60.0
    tail_lines: ClassVar[int] = 40

    @property
    def log(self) -> Path:
        return self.directory / self.log_name

    def log_tail(self, lines: int | None = None) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-(lines or self.tail_lines) :])

    def exited(self) -> RuntimeError:
        """The error for a server that has exited (reaped) when it should run."""
        return RuntimeError(
            f"{self.name} exited with code {self.proc.returncode}:\n{self.log_tail()}"
        )

    def pause(self, seconds: float = 0.2) -> None:
        """A short wait between two polls that ends at once, failing, should the
        server exit."""
        try:
            self.proc.wait(seconds)
        except subprocess.TimeoutExpired:
            return
        raise self.exited()

    #: the name cdc_chain.py knows it by
    _pause = pause

    def stop(self) -> int:
        """:attr:`stop_signal`, a bounded wait, SIGKILL if needed; the exit code (reaped)."""
        if self.proc.poll() is None:
            self.proc.send_signal(self.stop_signal)
            try:
                self.proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(self.stop_timeout)
        return int(self.proc.returncode)


def spawn(
    command: Sequence[str], log_path: Path, *, append: bool = False, **popen: Any
) -> subprocess.Popen[bytes]:
    """``command`` in a session of its own, its output (both streams) in ``log_path``
    (appended to, after a setup step's output, when ``append``), no input."""
    with open(log_path, "ab" if append else "wb") as log:
        return subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            **popen,
        )


def started(
    service: S,
    probe: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    errors: tuple[type[BaseException], ...] = (),
) -> S:
    """``service`` once ``probe()`` is true; ``errors`` raised by the probe mean "not
    answering yet". A server that exits first fails at once, one that does not answer
    in ``timeout`` seconds fails naming ``what`` (the server and its address), both
    with the tail of its log; either way, or on an interrupt, it is stopped (reaped)."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    try:
        while time.monotonic() < deadline:
            if service.proc.poll() is not None:
                raise service.exited()
            try:
                if probe():
                    return service
            except errors as e:
                last = e
            service.pause(0.1)
        raise RuntimeError(
            f"{what} did not answer in {timeout:.0f}s ({last}):\n{service.log_tail()}"
        )
    except BaseException:
        service.stop()
        raise


def on_free_port(start: Callable[[], S], log_path: Path, taken: str, tries: int = PORT_TRIES) -> S:
    """``start()`` (which picks its own free ports), again up to ``tries`` times in all
    while it fails with ``taken`` in its log: a port found free is only free when
    looked at, and another process may bind it first."""
    for attempt in range(1, tries + 1):
        try:
            return start()
        except RuntimeError:
            text = ""
            with contextlib.suppress(OSError):
                text = log_path.read_text(errors="replace")
            if attempt == tries or taken not in text:
                raise
    raise AssertionError("unreachable")
