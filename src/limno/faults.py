"""Faults: what ``verify`` finds. A fault names the object and the broken invariant."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Fault"]


@dataclass(frozen=True)
class Fault:
    """One broken invariant, located at a stored object (or prefix)."""

    path: str
    problem: str
    #: what to do about it (empty when there is nothing specific to say)
    fix: str = ""

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}" + (f" (to fix: {self.fix})" if self.fix else "")
