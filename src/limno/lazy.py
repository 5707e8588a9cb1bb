"""Modules bound now and imported at first use: how a command that needs no Arrow starts fast.

pyarrow, DuckDB, numpy and datasketches take most of a second to import, while
``limno ls`` or ``limno log`` only read JSON journals. So the layers a command goes
through before it touches data (the CLI, the lake interface, the lake, the pools,
and the data layer's model types) bind such modules lazily, in one pattern
(docs/architecture.md, "Layers", says where it applies)::

    if TYPE_CHECKING:
        import pyarrow as pa
    else:
        pa = lazy_module("pyarrow")

Type checkers and import-linter see the real import; at run time ``pa`` is a stand-in
that imports pyarrow on its first attribute read (``pa.table(...)``), in whichever
command needs it: what ``lazy import pyarrow as pa`` says in Pythons that have
explicit lazy imports (PEP 810). tests/cli/test_start_imports.py holds the commands
that read only journals to it.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__all__ = ["lazy_module"]


class _LazyModule(types.ModuleType):
    """Module ``__name__``, imported when an attribute is first read from it.

    Every read goes to the module itself (nothing is copied), so a test that
    replaces one of its attributes is seen here too.
    """

    def __getattr__(self, attr: str) -> Any:
        module = self.__dict__.get(_TARGET)
        if module is None:
            # what an import statement runs (unlike importlib.import_module, it shows in
            # ``python -X importtime``); it waits for an import in progress elsewhere
            __import__(self.__name__)
            module = self.__dict__[_TARGET] = sys.modules[self.__name__]
        return getattr(module, attr)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (as by Spark, with a function that reads it) as the module itself."""
        return importlib.import_module, (self.__name__,)


_TARGET = "_limno_lazy_target"


def lazy_module(name: str) -> types.ModuleType:
    """Module ``name``: the module itself if it is imported already, else a stand-in that
    imports it on the first attribute read."""
    loaded = sys.modules.get(name)
    if loaded is None or getattr(getattr(loaded, "__spec__", None), "_initializing", False):
        # absent, or being imported by another thread right now: its attributes may not
        # exist yet, so bind a stand-in whose first read waits for that import to finish
        return _LazyModule(name)
    return loaded
