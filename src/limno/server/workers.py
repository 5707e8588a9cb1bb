"""``limno serve --workers N``: N server processes answering on one socket.

One server process runs Python under one interpreter lock: with many clients at
once (loads from a fleet of writers), it is busy with one request's Python while
the machine has idle cores. The server keeps no state of its own (the lake holds
it all), so several processes may serve it side by side: the parent binds the
socket, starts N workers (spawned, not forked: the parent has opened the lake, and
its storage runtime's threads do not survive a fork), each accepts connections on
the shared socket, and the kernel spreads them.

Each worker has its own authenticator cache (a deleted key is refused by every
worker within its delay, as by separate servers) and its own event streams, which
its shutdown ends. The parent says the one ready line once every worker listens,
passes SIGTERM and SIGINT on to them, and exits 0 when all have stopped cleanly;
a worker that dies on its own stops the others, and the server, with an error.
"""

from __future__ import annotations

import multiprocessing
import signal
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

from limno.errors import LimnoError

if TYPE_CHECKING:
    import socket
    from multiprocessing.connection import Connection

    from limno.engines.query_limits import QueryLimits
    from limno.server.guard import Options
    from limno.server.run import S3Listener

__all__ = ["supervise"]

#: longest the workers may take to start (imports, opening the lake)
_START = 120.0
#: longest they may take to stop after the signal (in-flight requests: up to 30 s)
_STOP = 60.0


def supervise(
    workers: int,
    ready: Callable[[], None],
    sock: socket.socket,
    location: str,
    auth: bool,
    limits: QueryLimits | None,
    opts: Options,
    s3: S3Listener | None = None,
) -> None:
    """Run ``workers`` server processes on ``sock`` (and the S3 gateway's ``s3``) until a
    stop signal (see module)."""
    ctx = multiprocessing.get_context("spawn")
    pipes = [ctx.Pipe(duplex=False) for _ in range(workers)]
    procs = [
        ctx.Process(
            target=_worker,
            args=(sock, location, auth, limits, opts, send, s3),
            name=f"limno-serve-{i}",
        )
        for i, (_, send) in enumerate(pipes)
    ]
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for p in procs:
            if p.pid is not None and p.exitcode is None:
                p.terminate()  # SIGTERM: the worker stops gracefully

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for p, (_, send) in zip(procs, pipes, strict=True):
            p.start()
            send.close()  # the worker's end: the parent sees EOF if it dies
        _wait_ready(procs, [recv for recv, _ in pipes], lambda: stopping)
        if not stopping:
            ready()
        failed = _wait_all(procs, lambda: stopping)
        if failed and not stopping:
            stop(signal.SIGTERM, None)
            _join(procs)
            raise LimnoError(f"limno serve: a worker exited with code {failed}")
        _join(procs)
        codes = [p.exitcode for p in procs]
        if any(code != 0 for code in codes):
            raise LimnoError(f"limno serve: workers exited with codes {codes}")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for p in procs:
            if p.pid is not None and p.exitcode is None:
                p.kill()
                p.join()
        for recv, send in pipes:
            recv.close()
            send.close()


def _wait_ready(procs: list[Any], pipes: list[Any], stopping: Callable[[], bool]) -> None:
    """Until each worker has said it listens (a message on its pipe)."""
    deadline = time.monotonic() + _START
    waiting = list(pipes)
    while waiting and not stopping():
        if any(p.exitcode is not None for p in procs):
            raise LimnoError("limno serve: a worker failed to start (see above)")
        if time.monotonic() > deadline:
            raise LimnoError(f"limno serve: the workers did not start in {_START:g} s")
        for ready in wait(waiting, timeout=0.5):
            conn: Any = ready
            try:
                conn.recv_bytes()
            except EOFError:
                continue  # it died: seen by its exit code next round
            waiting.remove(conn)


def _wait_all(procs: list[Any], stopping: Callable[[], bool]) -> int:
    """Wait until every worker has exited (0) or, unasked, one has failed (its code)."""
    left = list(procs)
    while left:
        wait([p.sentinel for p in left], timeout=1.0)
        for p in list(left):
            if p.exitcode is not None:
                left.remove(p)
                if p.exitcode != 0 and not stopping():
                    return int(p.exitcode)
    return 0


def _join(procs: list[Any]) -> None:
    deadline = time.monotonic() + _STOP
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))


def _worker(
    sock: socket.socket,
    location: str,
    auth: bool,
    limits: QueryLimits | None,
    opts: Options,
    started: Connection,
    s3: S3Listener | None = None,
) -> None:
    """One worker process: the app on the shared socket, until SIGTERM (exit 0)."""
    from limno.api.local import LocalLake
    from limno.server.run import authenticator, run_on

    try:
        lake = LocalLake.open(location)
        checker = authenticator(lake, lambda line: None) if auth else None
        run_on(sock, lake, checker, limits, opts, lambda: started.send_bytes(b"ready"), s3)
    except LimnoError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        started.close()
        sock.close()
        if s3 is not None:
            s3[1].close()
