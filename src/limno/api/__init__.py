"""The one lake interface (:class:`Lake`, :class:`Pool`) and its implementations.

The CLI, the Python API and the server use only this interface, so every command
works the same on a lake in this process and, next, on one behind ``limno serve``.
``LocalPool`` is imported at its first use (PEP 562): it brings the pool layer, which
commands that never open a pool (``limno ls``) do without.
"""

from typing import TYPE_CHECKING, Any

from limno.api.base import DEFAULT_TARGET_SIZE, Engine, Lake, Pool, Source, register
from limno.api.local import LocalLake

if TYPE_CHECKING:
    from limno.api.local_pool import LocalPool

__all__ = [
    "DEFAULT_TARGET_SIZE",
    "Engine",
    "Lake",
    "LocalLake",
    "LocalPool",
    "Pool",
    "Source",
    "register",
]


def __getattr__(name: str) -> Any:
    if name != "LocalPool":
        raise AttributeError(f"module 'limno.api' has no attribute {name!r}")
    from limno.api.local_pool import LocalPool

    globals()[name] = LocalPool
    return LocalPool


def __dir__() -> list[str]:
    return sorted({*globals(), "LocalPool"})
