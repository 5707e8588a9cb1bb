"""``stop_on_signals``: a signal that lands while the main thread holds the stop
event's own lock still sets it, and never deadlocks.

The watching commands wait on ``stop`` in the main thread, so a signal handler runs
now and then inside ``Event.wait`` while that thread holds the event's condition
lock. A handler that set the event there would wait for that lock forever (CI saw
``limno watch`` hang on Ctrl-C once). The test holds the lock on purpose while the
signal arrives. Nothing is raised into the main thread: a handler that did so once
had its exception land in a finalizer and printed as a traceback.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import pytest

from bounded import DEFAULT_TIMEOUT
from limno.cli._follow import stop_on_signals


@pytest.fixture(autouse=True)
def main_thread() -> None:
    """The signals below go to this process: only the main thread installs handlers
    for them (elsewhere they would stop the test run itself)."""
    assert threading.current_thread() is threading.main_thread()


def held(stop: threading.Event) -> Any:
    """The lock ``stop.wait()`` holds around its check (CPython's ``Event._cond``)."""
    return getattr(stop, "_cond")  # noqa: B009


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_event_lock_is_held_sets_stop(how: signal.Signals) -> None:
    before = signal.getsignal(how)
    stop = threading.Event()
    with stop_on_signals(stop):
        with held(stop):  # what the main thread holds inside stop.wait()
            os.kill(os.getpid(), how)  # the handler runs here, before the next bytecode
            assert not getattr(stop, "_flag")  # noqa: B009
        assert stop.wait(DEFAULT_TIMEOUT)
    assert signal.getsignal(how) is before


def test_the_handler_raises_nothing_into_the_main_thread() -> None:
    stop = threading.Event()
    with stop_on_signals(stop):
        os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt, no other exception
        assert stop.wait(DEFAULT_TIMEOUT)


def test_no_signal_leaves_stop_unset_and_the_handlers_restored() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    stop = threading.Event()
    with stop_on_signals(stop):
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
    assert not stop.is_set()
    assert {s: signal.getsignal(s) for s in before} == before
    assert not any(t.name == "limno-signals" for t in threading.enumerate())
