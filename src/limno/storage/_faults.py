"""Fault injection: a store that fails, delays, crashes or pauses on chosen calls.

For tests of what the lake promises when the store misbehaves (``tests/pools/test_faults_*``),
and for trying it by hand. :class:`FaultyStorage` wraps any store; each
:class:`Rule` names an operation (or a class of them), which call (the Nth, or
every one), optionally a path pattern, and what happens:

- ``fail``: raise :class:`~limno.errors.StorageError` instead of the call;
- ``delay=S``: sleep S seconds, then make the call;
- ``crash-before`` / ``crash-after``: the process "dies" just before or just after
  the call. In-process this raises :class:`Crash` (a BaseException, so no
  ``except Exception`` handler swallows it) and every later call on the store
  raises it too, so cleanup code cannot touch the store, as after a real crash;
  with ``LIMNO_FAULTS`` in a child process the process exits at once (``os._exit``).

``open_storage`` wraps every store it opens when ``LIMNO_FAULTS`` is set, e.g.
``LIMNO_FAULTS="put:3:crash-after;get:*:delay=0.05;write:2:fail@*/commits/*"``
(``op:nth:action[@glob]``, rules separated by ``;``; ``nth`` counts the calls of that
op, from 1; ``*`` is every call). Ops: the :class:`~limno.storage.Storage` methods,
plus ``read`` (get, get_range, head), ``write`` (put, put_if_absent,
replace_if_equal, put_file, move_file, copy), ``remove`` (delete, delete_partial)
and ``any``.

An ``observer`` callable sees every call first (``(op, path)``); the interleaving
tests use it to pause a thread before its Nth call. ``threads`` limits the rules to
calls from some threads (say, not the lease keeper's heartbeat, which may land at
any moment), so that "the Nth call" means the same call in every run.
"""

from __future__ import annotations

import fnmatch
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from limno.errors import InvalidInputError, StorageError
from limno.storage._base import ListResult, ObjectInfo, Storage

__all__ = ["Crash", "FaultyStorage", "Rule", "parse_rules"]

_CLASSES = {
    "read": {"get", "get_range", "head"},
    "write": {"put", "put_if_absent", "replace_if_equal", "put_file", "move_file", "copy"},
    "remove": {"delete", "delete_if_equal", "delete_partial"},
}
_OPS = {
    "get",
    "get_range",
    "head",
    "put",
    "put_if_absent",
    "replace_if_equal",
    "put_file",
    "move_file",
    "list",
    "list_partial",
    "delete",
    "delete_if_equal",
    "delete_partial",
    "copy",
}
_ACTIONS = ("fail", "delay", "crash-before", "crash-after")


class Crash(BaseException):  # noqa: N818 - it is not an error the program may handle
    """The simulated death of the process (in-process fault injection)."""


@dataclass(frozen=True)
class Rule:
    """Do ``action`` on the ``nth`` call (None: every call) of ``op`` matching ``glob``."""

    op: str
    nth: int | None
    action: str
    seconds: float = 0.0
    glob: str | None = None

    def matches(self, op: str, path: str) -> bool:
        if self.op != "any" and op != self.op and op not in _CLASSES.get(self.op, ()):
            return False
        return self.glob is None or fnmatch.fnmatchcase(path, self.glob)


def parse_rules(text: str) -> list[Rule]:
    """Rules from ``op:nth:action[@glob];...`` (see the module docstring)."""
    rules = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        spec, _, glob = part.partition("@")
        bits = spec.split(":")
        if len(bits) != 3:
            raise InvalidInputError(f"LIMNO_FAULTS: {part!r} is not op:nth:action[@glob]")
        op, nth, action = bits
        if op not in _OPS and op not in _CLASSES and op != "any":
            raise InvalidInputError(f"LIMNO_FAULTS: unknown op {op!r}")
        if nth != "*" and not (nth.isdigit() and int(nth) > 0):
            raise InvalidInputError(f"LIMNO_FAULTS: call number {nth!r} is not * or 1, 2, ...")
        name, _, arg = action.partition("=")
        if name not in _ACTIONS:
            raise InvalidInputError(f"LIMNO_FAULTS: unknown action {name!r}")
        try:
            seconds = float(arg) if name == "delay" else 0.0
        except ValueError:
            raise InvalidInputError(f"LIMNO_FAULTS: bad delay {arg!r}") from None
        rules.append(Rule(op, None if nth == "*" else int(nth), name, seconds, glob or None))
    return rules


class FaultyStorage(Storage):
    """A store that injects the faults its rules name (see the module docstring)."""

    def __init__(
        self,
        inner: Storage,
        rules: Sequence[Rule] = (),
        observer: Callable[[str, str], None] | None = None,
        exit_on_crash: bool = False,
        threads: Callable[[str], bool] | None = None,
    ) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.rules = list(rules)
        self.observer = observer
        #: rules count and fire only on calls from threads whose name passes (None: all)
        self.threads = threads
        self.exit_on_crash = exit_on_crash
        self.counts: dict[tuple[int, str], int] = {}
        self.calls: list[tuple[str, str]] = []
        self.crashed = False
        self._lock = threading.Lock()

    # -- the injection ------------------------------------------------------------
    def _crash(self, op: str, path: str) -> None:
        self.crashed = True
        if self.exit_on_crash:
            os._exit(137)
        raise Crash(f"injected crash at {op} {path}")

    def _fire(self, op: str, path: str, after: bool) -> None:
        for rule in self._due(op, path, after):
            if rule.action == "fail":
                raise StorageError(f"storage error on {path}: injected failure of {op}")
            if rule.action == "delay":
                time.sleep(rule.seconds)
            elif rule.action in ("crash-before", "crash-after"):
                self._crash(op, path)

    def _due(self, op: str, path: str, after: bool) -> Iterator[Rule]:
        if self.threads is not None and not self.threads(threading.current_thread().name):
            return
        with self._lock:
            due = []
            for i, rule in enumerate(self.rules):
                if (rule.action == "crash-after") != after or not rule.matches(op, path):
                    continue
                n = self.counts.get((i, "n"), 0) + 1
                self.counts[(i, "n")] = n
                if rule.nth is None or rule.nth == n:
                    due.append(rule)
        yield from due

    def _call(self, op: str, path: str, fn: Callable[[], Any]) -> Any:
        if self.crashed:
            raise Crash("the process crashed earlier (injected)")
        if self.observer is not None:
            self.observer(op, path)
        if self.threads is None or self.threads(threading.current_thread().name):
            with self._lock:
                self.calls.append((op, path))
        self._fire(op, path, after=False)
        result = fn()
        self._fire(op, path, after=True)
        return result

    # -- the Storage interface ----------------------------------------------------
    def get(self, path: str) -> bytes:
        out: bytes = self._call("get", path, lambda: self.inner.get(path))
        return out

    def get_range(self, path: str, start: int, end: int) -> bytes:
        out: bytes = self._call("get_range", path, lambda: self.inner.get_range(path, start, end))
        return out

    def head(self, path: str) -> ObjectInfo:
        out: ObjectInfo = self._call("head", path, lambda: self.inner.head(path))
        return out

    def put(self, path: str, data: bytes) -> ObjectInfo:
        out: ObjectInfo = self._call("put", path, lambda: self.inner.put(path, data))
        return out

    def put_if_absent(self, path: str, data: bytes) -> ObjectInfo:
        out: ObjectInfo = self._call(
            "put_if_absent", path, lambda: self.inner.put_if_absent(path, data)
        )
        return out

    def replace_if_equal(self, path: str, data: bytes, expected: bytes) -> bool:
        return bool(
            self._call(
                "replace_if_equal",
                path,
                lambda: self.inner.replace_if_equal(path, data, expected),
            )
        )

    def put_file(self, path: str, local_file: str) -> ObjectInfo:
        out: ObjectInfo = self._call(
            "put_file", path, lambda: self.inner.put_file(path, local_file)
        )
        return out

    def move_file(self, path: str, local_file: str) -> ObjectInfo:
        out: ObjectInfo = self._call(
            "move_file", path, lambda: self.inner.move_file(path, local_file)
        )
        return out

    def staging_file(self, path: str) -> str | None:
        return self.inner.staging_file(path)

    def list(self, prefix: str = "", delimiter: str | None = None) -> ListResult:
        out: ListResult = self._call("list", prefix, lambda: self.inner.list(prefix, delimiter))
        return out

    def walk(self, prefix: str = "") -> Iterator[ObjectInfo]:
        listed: list[ObjectInfo] = self._call("list", prefix, lambda: list(self.inner.walk(prefix)))
        yield from listed

    def list_partial(self, prefix: str = "") -> Sequence[ObjectInfo]:
        out: Sequence[ObjectInfo] = self._call(
            "list_partial", prefix, lambda: self.inner.list_partial(prefix)
        )
        return out

    def delete(self, path: str) -> None:
        self._call("delete", path, lambda: self.inner.delete(path))

    def delete_if_equal(self, path: str, data: bytes) -> bool:
        return bool(
            self._call("delete_if_equal", path, lambda: self.inner.delete_if_equal(path, data))
        )

    def delete_partial(self, path: str) -> None:
        self._call("delete_partial", path, lambda: self.inner.delete_partial(path))

    def copy(self, src: str, dst: str) -> None:
        self._call("copy", dst, lambda: self.inner.copy(src, dst))

    def exists(self, path: str) -> bool:
        return super().exists(path)

    def local_path(self, path: str) -> str | None:
        return self.inner.local_path(path)

    def arrow_filesystem(self) -> tuple[Any, str] | None:
        return self.inner.arrow_filesystem()

    def __repr__(self) -> str:
        return f"<FaultyStorage {self.uri} {len(self.rules)} rule(s)>"
