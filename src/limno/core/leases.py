"""Leases: how a process that is writing objects tells vacuum "not these, not yet".

A writer writes data objects first and references them later (a commit, or a
staging entry). In between, nothing in the lake points at them, so a vacuum that
runs meanwhile would see unreferenced objects. The grace period covers short
writes; a lease covers any write, however long it runs.

A lease is a small JSON object ``<pool-id>/leases/<ksuid>.json`` written before the
writer creates its first object and deleted when the write is over. Its id is a
KSUID, so it carries the writer's clock: vacuum keeps every object whose own id (a
KSUID from the same kind of clock) is not older than the lease, less a margin for
clock skew between hosts (:data:`SKEW`). Vacuum does not need to know which objects
a lease covers, and the writer pays two small writes per operation, not one per
object.

A lease is live while its process is: vacuum checks the process directly when the
lease was taken on the same machine (same host, boot and pid namespace: the pid
must still run and have the same start time; in the very process that took it,
the lease must still be held, so a release whose delete failed leaves a dead
file, not a live lease), else by its heartbeat, which a
background thread renews every :data:`HEARTBEAT` seconds (a lease not renewed for
:data:`TTL` is dead). A dead lease protects nothing and vacuum deletes it. A
writer whose lease died while it was still running (a process stopped for longer
than the TTL) is caught when it commits: see :mod:`limno.core.gc`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from limno.errors import LimnoError, NotFoundError
from limno.ksuid import is_ksuid, ksuid, ksuid_time
from limno.storage import Storage

__all__ = ["HEARTBEAT", "SKEW", "TTL", "Lease", "LeaseInfo", "Leases", "process_identity"]

#: seconds between heartbeats of a live lease
HEARTBEAT = 20.0
#: a lease whose heartbeat is older than this (seconds) is dead (other machines only)
TTL = 120.0
#: objects up to this many seconds older than a lease are still covered by it
SKEW = 60.0


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def _start_ticks(pid: int) -> str | None:
    """A process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22)."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after the last ')'
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def _pid_namespace() -> str | None:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return None


#: the parts of a process's identity that stay as long as the process does, by pid (a
#: forked child has its own)
_lasting: dict[int, dict[str, Any]] = {}


def process_identity() -> dict[str, Any]:
    """What identifies this process to another process on the same machine."""
    import socket  # writers and vacuum only

    pid = os.getpid()
    lasting = _lasting.get(pid)
    if lasting is None:
        lasting = _lasting[pid] = {
            "boot": _read("/proc/sys/kernel/random/boot_id"),
            "pidns": _pid_namespace(),
            "pid": pid,
            "start": _start_ticks(pid),
        }
    return {"host": socket.gethostname(), **lasting}


def _same_machine(info: dict[str, Any], me: dict[str, Any]) -> bool:
    return all(
        info.get(k) is not None and info.get(k) == me.get(k) for k in ("host", "boot", "pidns")
    )


@dataclass(frozen=True)
class LeaseInfo:
    """A lease as vacuum sees it."""

    id: str
    path: str
    op: str
    live: bool

    @property
    def since(self) -> float:
        """The lease's start (Unix seconds, the writer's clock)."""
        return ksuid_time(self.id)

    def covers(self, key: str) -> bool:
        """Whether an object named ``key`` may belong to the write holding this lease."""
        if not is_ksuid(key):
            return True  # not named by a writer's clock: keep it while anything writes
        return ksuid_time(key) >= self.since - SKEW


class Lease:
    """A held lease (see :meth:`Leases.hold`)."""

    def __init__(self, storage: Storage, lease_id: str, path: str, body: bytes) -> None:
        self.storage = storage
        self.id = lease_id
        self.path = path
        self.body = body
        self.renewed = dt.datetime.now(dt.UTC)

    def renew(self) -> None:
        self.storage.put(self.path, self.body)
        self.renewed = dt.datetime.now(dt.UTC)


class _Keeper:
    """One daemon thread per process renewing every held lease."""

    def __init__(self) -> None:
        self._held: dict[str, Lease] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._held[lease.path] = lease
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="limno-leases", daemon=True)
                self._thread.start()

    def remove(self, path: str) -> None:
        with self._lock:
            self._held.pop(path, None)

    def holds(self, path: str) -> bool:
        with self._lock:
            return path in self._held

    def _run(self) -> None:
        while True:
            self._wake.wait(HEARTBEAT)
            with self._lock:
                held = list(self._held.values())
            for lease in held:
                try:
                    lease.renew()
                except BaseException:  # noqa: BLE001 - one lease's store failing must not
                    continue  # stop the renewal of the others (the next beat retries)


_keeper = _Keeper()


class Leases:
    """The leases of one pool."""

    def __init__(self, storage: Storage, pool_id: str) -> None:
        self.storage = storage
        self.prefix = f"{pool_id}/leases"

    def acquire(self, op: str) -> Lease:
        """Take a lease (renewed in the background until :meth:`release`)."""
        lease_id = ksuid()
        body = json.dumps(
            {"id": lease_id, "op": op, **process_identity(), "ttl": TTL}, sort_keys=True
        ).encode()
        lease = Lease(self.storage, lease_id, f"{self.prefix}/{lease_id}.json", body)
        _keeper.add(lease)  # first: a vacuum of this process judges its leases by it
        try:
            self.storage.put(lease.path, body)
        except BaseException:
            _keeper.remove(lease.path)
            raise
        return lease

    def release(self, path: str) -> None:
        """Give up the lease stored at ``path`` (a :attr:`Lease.path`)."""
        _keeper.remove(path)
        with contextlib.suppress(LimnoError):
            self.storage.delete(path)

    @contextlib.contextmanager
    def hold(self, op: str) -> Iterator[Lease]:
        """Hold a lease for the duration of a write."""
        lease = self.acquire(op)
        try:
            yield lease
        finally:
            self.release(lease.path)

    def scan(self, now: dt.datetime | None = None) -> list[LeaseInfo]:
        """Every lease of the pool, each judged live or dead."""
        now = now or dt.datetime.now(dt.UTC)
        me = process_identity()
        out = []
        for info in self.storage.walk(self.prefix):
            name = info.path.rsplit("/", 1)[-1]
            lease_id = name.removesuffix(".json")
            if not is_ksuid(lease_id):
                continue
            try:
                doc = json.loads(self.storage.get(info.path))
            except NotFoundError:
                continue  # released meanwhile
            except (LimnoError, ValueError):
                doc = {}
            if not isinstance(doc, dict):
                doc = {}
            if _same_machine(doc, me) and (doc.get("pid"), doc.get("start")) == (
                me["pid"],
                me["start"],
            ):
                # this process's own lease: live only while held (a release whose
                # delete failed leaves the file behind, and must not keep it live)
                live = _keeper.holds(info.path)
            elif _same_machine(doc, me) and isinstance(doc.get("pid"), int):
                live = doc.get("start") is not None and _start_ticks(doc["pid"]) == doc["start"]
            else:
                ttl = float(doc.get("ttl", TTL)) if isinstance(doc.get("ttl"), int | float) else TTL
                live = (now - info.last_modified).total_seconds() < ttl
            out.append(LeaseInfo(lease_id, info.path, str(doc.get("op", "")), live))
        return out

    def reap(self, dead: list[LeaseInfo]) -> None:
        """Delete dead leases (their processes are gone)."""
        for lease in dead:
            with contextlib.suppress(LimnoError):
                self.storage.delete(lease.path)
