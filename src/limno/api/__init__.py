"""The one lake interface (:class:`Lake`, :class:`Pool`) and its implementations.

The CLI, the Python API and the server use only this interface, so every command
works the same on a lake in this process and, next, on one behind ``limno serve``.
"""

from limno.api.base import DEFAULT_TARGET_SIZE, Engine, Lake, Pool, Source, register
from limno.api.local import LocalLake, LocalPool

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
