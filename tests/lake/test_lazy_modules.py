"""``limno.lazy.lazy_module``: a module another thread is still importing is not bound
half-made (the server's threads once saw ``partially initialized module 'pyarrow'``)."""

from __future__ import annotations

import importlib.machinery
import sys
import threading
import types

import pytest

from limno.lazy import lazy_module


def _module(name: str, initializing: bool) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__spec__._initializing = initializing  # type: ignore[attr-defined]
    return module


def test_a_loaded_module_is_bound_as_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    done = _module("limno_test_done", initializing=False)
    monkeypatch.setitem(sys.modules, "limno_test_done", done)
    assert lazy_module("limno_test_done") is done


def test_a_module_being_imported_gets_a_stand_in_that_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    half = _module("limno_test_half", initializing=True)
    monkeypatch.setitem(sys.modules, "limno_test_half", half)
    bound = lazy_module("limno_test_half")
    assert bound is not half  # its attributes may not exist yet
    # the import finishes (elsewhere): the stand-in then reads the finished module
    half.answer = 42  # type: ignore[attr-defined]
    half.__spec__._initializing = False  # type: ignore[union-attr]
    assert bound.answer == 42


def test_threads_importing_at_once_all_see_a_whole_module() -> None:
    """Many threads read an attribute through stand-ins of one not-yet-imported module."""
    name = "xml.dom.minidom"
    sys.modules.pop(name, None)
    stand_ins = [lazy_module(name) for _ in range(16)]
    barrier = threading.Barrier(len(stand_ins))
    seen: list[object] = []
    errors: list[BaseException] = []

    def read(module: types.ModuleType) -> None:
        barrier.wait(timeout=30)
        try:
            seen.append(module.parseString)
        except BaseException as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=read, args=(m,)) for m in stand_ins]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    assert len(seen) == len(stand_ins) and len(set(map(id, seen))) == 1
