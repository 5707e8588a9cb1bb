"""``stop_on_signals``: a signal that lands while the main thread holds the stop
event's own lock still sets it, and never deadlocks.

The watching commands wait on ``stop`` in the main thread, so a signal handler runs
now and then inside ``Event.wait`` while that thread holds the event's condition
lock. A handler that set the event there would wait for that lock forever (CI saw
``limno watch`` hang on Ctrl-C once). The test holds the lock on purpose while the
signal arrives. An interrupt raised inside a finalizer (an HTTP stream's generator
collected) is not printed as an "Exception ignored" traceback (CI saw one on Ctrl-C
of ``limno watch`` on a served lake); other exceptions there still are.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import pytest

from bounded import DEFAULT_TIMEOUT
from limno.cli._follow import stop_on_signals


class _Cut(Exception):
    pass


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


def test_interrupt_raises_in_the_main_thread_and_stop_is_set() -> None:
    stop = threading.Event()
    with pytest.raises(_Cut), stop_on_signals(stop, _Cut), held(stop):
        os.kill(os.getpid(), signal.SIGTERM)
    assert stop.wait(DEFAULT_TIMEOUT)


def test_no_signal_leaves_stop_unset_and_the_handlers_restored() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    stop = threading.Event()
    with stop_on_signals(stop):
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
    assert not stop.is_set()
    assert {s: signal.getsignal(s) for s in before} == before
    assert not any(t.name == "limno-signals" for t in threading.enumerate())


class _Finalized:
    """An object whose finalizer gets the signal (as an HTTP stream's generator did,
    closed while it was collected), or fails on its own."""

    def __init__(self, signalled: bool) -> None:
        self.signalled = signalled

    def __del__(self) -> None:
        if self.signalled:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler raises the interrupt here
        else:
            raise ValueError("its own failure")


@pytest.mark.parametrize("signalled", [True, False])
def test_only_an_interrupt_inside_a_finalizer_goes_unreported(
    signalled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    reports: list[BaseException | None] = []
    monkeypatch.setattr("sys.unraisablehook", lambda info: reports.append(info.exc_value))
    stop = threading.Event()
    with stop_on_signals(stop, _Cut):
        _Finalized(signalled)  # collected at once: its __del__ runs here
        if signalled:
            assert stop.wait(DEFAULT_TIMEOUT)
    if signalled:
        assert reports == []
    else:
        assert [type(e) for e in reports] == [ValueError]
        assert not stop.is_set()
