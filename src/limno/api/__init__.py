"""The one lake interface (:class:`Lake`, :class:`Pool`) and its implementations.

The CLI, the Python API and the server use only this interface, so every command
works the same on a lake in this process and, next, on one behind ``limno serve``.
Pools are of two kinds: record pools (:class:`Pool`) and file pools (:class:`FilePool`),
whose git operations both have from :class:`VersionedPool`. ``LocalPool`` and
``LocalFilePool`` are imported at their first use (PEP 562): they bring the pool layer,
which commands that never open a pool (``limno ls``) do without.
"""

from typing import TYPE_CHECKING, Any

from limno.api.base import (
    DEFAULT_TARGET_SIZE,
    Engine,
    Kind,
    Lake,
    Pool,
    Source,
    VersionedPool,
    register,
)
from limno.api.base_files import FilePool
from limno.api.local import LocalLake

if TYPE_CHECKING:
    from limno.api.local_files import LocalFilePool
    from limno.api.local_pool import LocalPool

__all__ = [
    "DEFAULT_TARGET_SIZE",
    "Engine",
    "FilePool",
    "Kind",
    "Lake",
    "LocalFilePool",
    "LocalLake",
    "LocalPool",
    "Pool",
    "Source",
    "VersionedPool",
    "register",
]

#: the implementations imported on first use, by name: their modules
_LAZY = {"LocalPool": "limno.api.local_pool", "LocalFilePool": "limno.api.local_files"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'limno.api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
