"""A pool's settings, typed and validated in one place.

They are stored in the pool's registry entry as plain JSON (``iterators``,
``split_threshold``, ``compaction``, ``retention`` in seconds per branch glob,
``hooks``, ``batcher``); :meth:`PoolSettings.from_json` checks every field, so the rest of
limno reads attributes, never a dict.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from limno.core.hooks import HookSpec
from limno.data.iterators import IteratorSpec
from limno.errors import InvalidInputError

__all__ = [
    "BATCHER_NAMES",
    "COMPACTION_STRATEGIES",
    "DEFAULT_SPLIT_THRESHOLD",
    "BatcherSettings",
    "CompactionSettings",
    "PoolSettings",
]

#: compaction strategies (see :mod:`limno.pools.records.compaction`)
COMPACTION_STRATEGIES = ("size-ratio", "basic", "overlap")
#: rows a leaf partition may hold before it splits (Sleeper's default)
DEFAULT_SPLIT_THRESHOLD = 1_000_000_000


@dataclass(frozen=True)
class CompactionSettings:
    """Which compaction strategy picks jobs, with Sleeper's size-ratio defaults."""

    strategy: str = "size-ratio"
    ratio: float = 3.0
    batch: int = 12

    def __post_init__(self) -> None:
        if self.strategy not in COMPACTION_STRATEGIES:
            raise InvalidInputError(
                f"unknown compaction strategy {self.strategy!r}"
                f" (one of {', '.join(COMPACTION_STRATEGIES)})"
            )
        if not self.ratio >= 1 or self.batch < 2:
            raise InvalidInputError("compaction needs ratio >= 1 and batch >= 2")

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CompactionSettings:
        try:
            return cls(
                str(d.get("strategy", "size-ratio")),
                float(d.get("ratio", 3.0)),
                int(d.get("batch", 12)),
            )
        except (TypeError, ValueError) as e:
            raise InvalidInputError(f"invalid compaction settings {dict(d)!r}: {e}") from e

    def to_json(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "ratio": self.ratio, "batch": self.batch}


#: the batcher's settings as :meth:`BatcherSettings.parse` names them -> their fields
BATCHER_NAMES = {
    "min-files": "min_files",
    "max-files": "max_files",
    "min-bytes": "min_bytes",
    "max-bytes": "max_bytes",
    "max-age": "max_age",
}


@dataclass(frozen=True)
class BatcherSettings:
    """When the ingest batcher (:mod:`limno.pools.ingest_queue`) turns queued files into
    jobs, and how big a job may be (Sleeper's batcher): a group of queued files becomes
    jobs once it holds ``min_files`` and ``min_bytes``, or once its oldest file has
    waited ``max_age``; each job takes at most ``max_files`` files and ``max_bytes``
    bytes (a single larger file is a job of its own)."""

    min_files: int = 1
    max_files: int = 100
    min_bytes: int = 0
    max_bytes: int = 1 << 30
    max_age: dt.timedelta = dt.timedelta(minutes=5)

    def __post_init__(self) -> None:
        if not 1 <= self.min_files <= self.max_files:
            raise InvalidInputError("the batcher needs 1 <= min-files <= max-files")
        if not 0 <= self.min_bytes <= self.max_bytes or self.max_bytes < 1:
            raise InvalidInputError(
                "the batcher needs 0 <= min-bytes <= max-bytes and max-bytes >= 1"
            )
        if self.max_age < dt.timedelta(0):
            raise InvalidInputError("the batcher's max-age must not be negative")

    def parse(self, text: str) -> BatcherSettings:
        """These settings changed by ``min-files=2,max-bytes=1GB,max-age=10m``."""
        from limno.units import parse_duration, parse_size

        changes: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, value = part.partition("=")
            field_name = BATCHER_NAMES.get(name.strip())
            if not sep or field_name is None:
                raise InvalidInputError(
                    f"batcher setting {part!r}: expected NAME=VALUE with NAME one of"
                    f" {', '.join(BATCHER_NAMES)}"
                )
            value = value.strip()
            if field_name == "max_age":
                changes[field_name] = parse_duration(value)
            elif field_name.endswith("bytes"):
                changes[field_name] = parse_size(value)
            elif value.isdigit():
                changes[field_name] = int(value)
            else:
                raise InvalidInputError(f"batcher setting {name}: not a whole number: {value!r}")
        return replace(self, **changes)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BatcherSettings:
        try:
            return cls(
                int(d.get("min_files", 1)),
                int(d.get("max_files", 100)),
                int(d.get("min_bytes", 0)),
                int(d.get("max_bytes", 1 << 30)),
                dt.timedelta(seconds=float(d.get("max_age", 300.0))),
            )
        except (TypeError, ValueError) as e:
            raise InvalidInputError(f"invalid batcher settings {dict(d)!r}: {e}") from e

    def to_json(self) -> dict[str, Any]:
        return {
            "min_files": self.min_files,
            "max_files": self.max_files,
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "max_age": self.max_age.total_seconds(),
        }


@dataclass(frozen=True)
class PoolSettings:
    """Everything about a pool but its name, id, kind, key, target size and schema."""

    iterators: IteratorSpec = field(default_factory=IteratorSpec)
    split_threshold: int = DEFAULT_SPLIT_THRESHOLD
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    #: branch glob -> how long vacuum keeps that branch's history (empty: all of it)
    retention: Mapping[str, dt.timedelta] = field(default_factory=dict)
    hooks: tuple[HookSpec, ...] = ()
    batcher: BatcherSettings = field(default_factory=BatcherSettings)

    def __post_init__(self) -> None:
        if self.split_threshold < 1:
            raise InvalidInputError("the split threshold must be at least 1 row")
        if any(w < dt.timedelta(0) for w in self.retention.values()):
            raise InvalidInputError("a retention window must not be negative")

    def with_hooks(self, hooks: tuple[HookSpec, ...]) -> PoolSettings:
        return replace(self, hooks=hooks)

    def to_json(self) -> dict[str, Any]:
        """The stored form (fields at their defaults are left out)."""
        out: dict[str, Any] = {}
        if self.iterators:
            out["iterators"] = self.iterators.to_json()
        if self.split_threshold != DEFAULT_SPLIT_THRESHOLD:
            out["split_threshold"] = self.split_threshold
        if self.compaction != CompactionSettings():
            out["compaction"] = self.compaction.to_json()
        if self.retention:
            out["retention"] = {g: w.total_seconds() for g, w in self.retention.items()}
        if self.hooks:
            out["hooks"] = [h.to_json() for h in self.hooks]
        if self.batcher != BatcherSettings():
            out["batcher"] = self.batcher.to_json()
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> PoolSettings:
        """Settings from their stored form; InvalidInputError names a bad field."""
        d = d or {}
        if not isinstance(d, Mapping):
            raise InvalidInputError(f"pool settings must be an object, not {d!r:.60}")
        try:
            retention = {
                str(g): dt.timedelta(seconds=float(s))
                for g, s in dict(d.get("retention") or {}).items()
            }
            threshold = int(d.get("split_threshold", DEFAULT_SPLIT_THRESHOLD))
        except (TypeError, ValueError) as e:
            raise InvalidInputError(f"invalid pool settings: {e}") from e
        return cls(
            iterators=IteratorSpec.from_json(d.get("iterators")),
            split_threshold=threshold,
            compaction=CompactionSettings.from_json(d.get("compaction") or {}),
            retention=retention,
            hooks=tuple(HookSpec.from_json(h) for h in d.get("hooks") or ()),
            batcher=BatcherSettings.from_json(d.get("batcher") or {}),
        )
