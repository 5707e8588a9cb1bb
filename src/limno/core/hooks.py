"""Hooks (lakeFS actions): code run before and after commits and merges.

A pre hook (``pre-commit``, ``pre-merge``) runs before anything becomes visible
and may veto the operation; a post hook (``post-commit``, ``post-merge``) runs
after it landed and can only be told about it (its failure is logged, not
raised: the change is already visible).

Hooks come from two places:

* the pool's configuration (persisted, so every process and the CLI run them):
  ``{"name", "event", "run": "shell command"}`` or ``{"name", "event",
  "python": "module:function"}``, optionally ``"branches": ["main", "release-*"]``
  (glob patterns; default all branches);
* callables registered in-process with :meth:`Hooks.register`.

A shell hook gets the event as JSON on stdin and as ``LIMNO_*`` environment
variables; a non-zero exit vetoes, and its output (stderr, else stdout) is the
reason. A Python hook is called with the event dict; raising vetoes, with the
exception's message as the reason.
"""

from __future__ import annotations

import fnmatch
import importlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from limno.errors import HookVetoError, InvalidInputError

__all__ = ["EVENTS", "HookSpec", "Hooks", "validate_hook"]

EVENTS = ("pre-commit", "post-commit", "pre-merge", "post-merge")
HOOK_TIMEOUT = 300.0

HookFn = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class HookSpec:
    """A configured hook."""

    name: str
    event: str
    run: str | None = None
    python: str | None = None
    branches: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "event": self.event}
        if self.run is not None:
            out["run"] = self.run
        if self.python is not None:
            out["python"] = self.python
        if self.branches:
            out["branches"] = list(self.branches)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> HookSpec:
        return validate_hook(
            cls(
                name=str(d.get("name", "")),
                event=str(d.get("event", "")),
                run=d.get("run"),
                python=d.get("python"),
                branches=tuple(d.get("branches") or ()),
            )
        )

    def applies_to(self, branch: str) -> bool:
        return not self.branches or any(fnmatch.fnmatchcase(branch, p) for p in self.branches)


def validate_hook(spec: HookSpec) -> HookSpec:
    if not spec.name:
        raise InvalidInputError("a hook needs a name")
    if spec.event not in EVENTS:
        raise InvalidInputError(f"unknown hook event {spec.event!r} (one of {', '.join(EVENTS)})")
    if (spec.run is None) == (spec.python is None):
        raise InvalidInputError(
            f"hook {spec.name!r}: give exactly one of a shell command or python"
        )
    if spec.python is not None and ":" not in spec.python:
        raise InvalidInputError(f"hook {spec.name!r}: python hooks are 'module:function'")
    return spec


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
        data = {"event": event, **payload}
        branch = str(data.get("branch", ""))
        pre = event.startswith("pre-")
        for name, run in self._runners(event, branch):
            try:
                run(data)
            except HookVetoError:
                if pre:
                    raise
                _warn("%s hook %r failed", event, name)
            except Exception as e:  # noqa: BLE001 - a hook's own failure is its veto
                if pre:
                    raise HookVetoError(f"{event} hook {name!r} vetoed: {e}") from e
                _warn("%s hook %r failed: %s", event, name, e)

    def _runners(self, event: str, branch: str) -> list[tuple[str, HookFn]]:
        out: list[tuple[str, HookFn]] = []
        for spec in self.specs:
            if spec.event == event and spec.applies_to(branch):
                out.append((spec.name, _runner(spec)))
        out.extend((name, fn) for ev, name, fn in self._callables if ev == event)
        return out


def _warn(message: str, *args: object) -> None:
    """Log a post hook's failure to logger ``limno.hooks`` (logging, a few milliseconds to
    import, loads only when a hook fails)."""
    import logging

    logging.getLogger("limno.hooks").warning(message, *args, stacklevel=2)


def _runner(spec: HookSpec) -> HookFn:
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
            raise HookVetoError(f"{spec.event} hook {spec.name!r} vetoed: {reason}")

    return shell
