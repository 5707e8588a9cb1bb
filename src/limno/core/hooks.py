"""Hooks (lakeFS actions): code run before and after commits and merges.

A pre hook (``pre-commit``, ``pre-merge``) runs before anything becomes visible
and may veto the operation; a post hook (``post-commit``, ``post-merge``) runs
after it landed and can only be told about it (its failure is logged, not
raised: the change is already visible).

Hooks come from two places:

* the pool's configuration (persisted, so every process and the CLI run them):
  ``{"name", "event", "run": "shell command"}``, ``{"name", "event",
  "python": "module:function"}`` or ``{"name", "event", "webhook": "https://...",
  "timeout": 10, "headers": {...}, "secret_env": "VAR"}``, optionally
  ``"branches": ["main", "release-*"]`` (glob patterns; default all branches);
* callables registered in-process with :meth:`Hooks.register`.

Every hook gets the same event: the operation's payload plus ``event``, a unique
``event_id`` (a KSUID) and the ``time`` it fired (ISO 8601, UTC). A shell hook gets
it as JSON on stdin and as ``LIMNO_*`` environment variables; a non-zero exit
vetoes, and its output (stderr, else stdout) is the reason. A Python hook is called
with the event dict; raising vetoes, with the exception's message as the reason. A
webhook gets it POSTed as JSON (:mod:`limno.core.webhooks`); anything but a 2xx
answer in time vetoes.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import fnmatch
import importlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from limno.errors import HookVetoError, InvalidInputError
from limno.ksuid import ksuid

__all__ = [
    "EVENTS",
    "HookFailure",
    "HookSpec",
    "HookVerdict",
    "Hooks",
    "recording",
    "validate_hook",
]

EVENTS = ("pre-commit", "post-commit", "pre-merge", "post-merge")
HOOK_TIMEOUT = 300.0

HookFn = Callable[[dict[str, Any]], None]


class HookFailure(Exception):
    """A configured hook said no; the message is its reason (a pre hook's failure
    becomes a HookVetoError naming the hook, a post hook's is logged)."""


@dataclass(frozen=True)
class HookSpec:
    """A configured hook: exactly one of ``run`` (shell), ``python`` or ``webhook``
    (a URL); ``timeout``, ``headers`` and ``secret_env`` (the name of the environment
    variable holding the HMAC key, never the key) are the webhook's."""

    name: str
    event: str
    run: str | None = None
    python: str | None = None
    branches: tuple[str, ...] = ()
    webhook: str | None = None
    timeout: float | None = None
    headers: tuple[tuple[str, str], ...] = ()
    secret_env: str | None = None

    @property
    def kind(self) -> str:
        return "webhook" if self.webhook is not None else "python" if self.python else "shell"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "event": self.event}
        if self.run is not None:
            out["run"] = self.run
        if self.python is not None:
            out["python"] = self.python
        if self.webhook is not None:
            out["webhook"] = self.webhook
        if self.timeout is not None:
            out["timeout"] = self.timeout
        if self.headers:
            out["headers"] = dict(self.headers)
        if self.secret_env is not None:
            out["secret_env"] = self.secret_env
        if self.branches:
            out["branches"] = list(self.branches)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> HookSpec:
        headers = d.get("headers") or {}
        if not isinstance(headers, Mapping):
            raise InvalidInputError(f"hook {d.get('name')!r}: headers are an object")
        timeout = d.get("timeout")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float)
        ):
            raise InvalidInputError(f"hook {d.get('name')!r}: timeout is a number of seconds")
        return validate_hook(
            cls(
                name=str(d.get("name", "")),
                event=str(d.get("event", "")),
                run=d.get("run"),
                python=d.get("python"),
                branches=tuple(d.get("branches") or ()),
                webhook=d.get("webhook"),
                timeout=None if timeout is None else float(timeout),
                headers=tuple((str(k), str(v)) for k, v in headers.items()),
                secret_env=d.get("secret_env"),
            )
        )

    def applies_to(self, branch: str) -> bool:
        return not self.branches or any(fnmatch.fnmatchcase(branch, p) for p in self.branches)


def validate_hook(spec: HookSpec) -> HookSpec:
    if not spec.name:
        raise InvalidInputError("a hook needs a name")
    if spec.event not in EVENTS:
        raise InvalidInputError(f"unknown hook event {spec.event!r} (one of {', '.join(EVENTS)})")
    if sum(x is not None for x in (spec.run, spec.python, spec.webhook)) != 1:
        raise InvalidInputError(
            f"hook {spec.name!r}: give exactly one of a shell command, python or a webhook"
        )
    if spec.python is not None and ":" not in spec.python:
        raise InvalidInputError(f"hook {spec.name!r}: python hooks are 'module:function'")
    if spec.webhook is not None or spec.timeout is not None or spec.headers or spec.secret_env:
        from limno.core.webhooks import validate_webhook  # only pools with webhooks

        validate_webhook(spec)
    return spec


@dataclass(frozen=True)
class HookVerdict:
    """What one hook said when it ran: ``passed``, ``vetoed`` (a pre hook that said no:
    the operation did not happen) or ``failed`` (a post hook: logged, the change stands),
    with its ``reason``."""

    event: str
    hook: str
    verdict: str
    reason: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "event": self.event,
            "hook": self.hook,
            "verdict": self.verdict,
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> HookVerdict:
        return cls(str(d["event"]), str(d["hook"]), str(d["verdict"]), str(d.get("reason", "")))


#: the verdicts list of the innermost :func:`recording` of this thread (or task)
_recorder: contextvars.ContextVar[list[HookVerdict] | None] = contextvars.ContextVar(
    "limno_hook_verdicts", default=None
)


@contextlib.contextmanager
def recording() -> Iterator[list[HookVerdict]]:
    """Collect the verdict of every hook that runs in this thread inside the block (a
    merge request keeps its pre-merge hooks' verdicts: :mod:`limno.pools.reviews`)."""
    found: list[HookVerdict] = []
    token = _recorder.set(found)
    try:
        yield found
    finally:
        _recorder.reset(token)


def _record(event: str, name: str, verdict: str, reason: str = "") -> None:
    found = _recorder.get()
    if found is not None:
        found.append(HookVerdict(event, name, verdict, reason))


class Hooks:
    """The hooks of one pool: configured specs plus in-process callables."""

    def __init__(self, specs: Sequence[HookSpec] = ()) -> None:
        self.specs = list(specs)
        self._callables: list[tuple[str, str, HookFn]] = []

    def register(self, event: str, fn: HookFn, name: str | None = None) -> None:
        """Run ``fn(event_dict)`` on ``event`` in this process."""
        if event not in EVENTS:
            raise InvalidInputError(f"unknown hook event {event!r} (one of {', '.join(EVENTS)})")
        self._callables.append((event, name or str(getattr(fn, "__name__", "hook")), fn))

    def fire(self, event: str, payload: Mapping[str, Any]) -> None:
        """Run every hook for ``event``; a pre hook's failure raises HookVetoError."""
        runners = self._runners(event, str(payload.get("branch", "")))
        if not runners:
            return
        data = {"event": event, "event_id": ksuid(), "time": _now(), **payload}
        pre = event.startswith("pre-")
        for name, run in runners:
            try:
                run(data)
            except HookVetoError as e:
                _record(event, name, "vetoed" if pre else "failed", str(e))
                if pre:
                    raise
                _warn("%s hook %r failed: %s", event, name, e)
            except Exception as e:  # noqa: BLE001 - a hook's own failure is its veto
                _record(event, name, "vetoed" if pre else "failed", str(e))
                if pre:
                    raise HookVetoError(f"{event} hook {name!r} vetoed: {e}") from e
                _warn("%s hook %r failed: %s", event, name, e)
            else:
                _record(event, name, "passed")

    def _runners(self, event: str, branch: str) -> list[tuple[str, HookFn]]:
        out: list[tuple[str, HookFn]] = []
        for spec in self.specs:
            if spec.event == event and spec.applies_to(branch):
                out.append((spec.name, _runner(spec)))
        out.extend((name, fn) for ev, name, fn in self._callables if ev == event)
        return out


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def _warn(message: str, *args: object) -> None:
    """Log a post hook's failure to logger ``limno.hooks`` (logging, a few milliseconds to
    import, loads only when a hook fails)."""
    import logging

    logging.getLogger("limno.hooks").warning(message, *args, stacklevel=2)


def _runner(spec: HookSpec) -> HookFn:
    if spec.webhook is not None:
        from limno.core.webhooks import post_event  # httpx, hmac: only pools with webhooks

        return lambda data: post_event(spec, data)
    if spec.python is not None:
        module, _, attr = spec.python.partition(":")

        def call(data: dict[str, Any]) -> None:
            fn = getattr(importlib.import_module(module), attr)
            fn(data)

        return call
    command = spec.run or ""

    def shell(data: dict[str, Any]) -> None:
        import subprocess  # only a pool with shell hooks runs processes

        env = dict(os.environ)
        for k, v in data.items():
            if isinstance(v, str | int | float):
                env[f"LIMNO_{k.upper().replace('-', '_')}"] = str(v)
        proc = subprocess.run(
            ["/bin/sh", "-c", command],
            input=json.dumps(data, default=str).encode(),
            capture_output=True,
            env=env,
            timeout=HOOK_TIMEOUT,
            check=False,
        )
        if proc.returncode != 0:
            said = (proc.stderr or proc.stdout).decode(errors="replace").strip()
            reason = said.splitlines()[-1] if said else f"exit status {proc.returncode}"
            raise HookFailure(reason)

    return shell
