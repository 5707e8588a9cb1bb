"""The public API: what ``import limno`` exports, and the one lake interface behind it."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pyarrow as pa
import pytest

import limno
from limno import api, errors
from limno.api.base import Lake as LakeInterface
from limno.api.base import Pool as PoolInterface
from limno.api.base_files import FilePool as FilePoolInterface
from limno.pools.registry import PoolConfig
from limno.pools.settings import CompactionSettings, PoolSettings

EXPORTED = {
    "Action",
    "AlreadyExistsError",
    "BatcherSettings",
    "Commit",
    "CompactionJob",
    "CompactionSettings",
    "Comparison",
    "ConflictError",
    "CorruptError",
    "DamagedObjectError",
    "DataObject",
    "DiffEntry",
    "Engine",
    "Event",
    "Fault",
    "FileChange",
    "FileEntry",
    "FilePool",
    "ForbiddenError",
    "HookSpec",
    "HookVerdict",
    "HookVetoError",
    "IndexSpec",
    "IngestJob",
    "InvalidInputError",
    "JobResult",
    "Lake",
    "LimnoError",
    "Listing",
    "MergeAttempt",
    "MergeRequest",
    "MergeResult",
    "MultipartError",
    "NotFoundError",
    "Pool",
    "PoolConfig",
    "PoolSettings",
    "PreconditionFailedError",
    "ProtectedBranchError",
    "QueryTimeoutError",
    "QueuedFile",
    "ResultTooLargeError",
    "Sampled",
    "StorageError",
    "TypedSchema",
    "UnauthenticatedError",
    "VacuumReport",
    "VersionedPool",
}


def test_exported_members() -> None:
    assert set(limno.__all__) == EXPORTED
    for name in EXPORTED:
        assert getattr(limno, name) is not None, name
    public = {n for n in dir(limno) if not n.startswith("_") and n[0].isupper()}
    assert public <= EXPORTED | {"api"}, public - EXPORTED


#: the names of typing (and None) a return annotation may hold beside model types
_TYPING = {"Any", "Iterator", "Mapping", "None", "Sequence"}


def test_every_model_type_the_interface_returns_is_exported() -> None:
    """What an operation of the lake interface returns, a caller can name (annotate,
    isinstance) from ``limno``: Arrow's types aside (``pa.Table``)."""
    returned: set[str] = set()
    for cls in (LakeInterface, PoolInterface, FilePoolInterface):
        for name in _abstract(cls):
            member = inspect.getattr_static(cls, name)
            fn = member.fget if isinstance(member, property) else member
            annotation = str(fn.__annotations__.get("return", ""))
            returned |= set(re.findall(r"(?<![.\w])([A-Z]\w*)", annotation)) - _TYPING
    assert {"IndexSpec", "QueuedFile", "IngestJob", "BatcherSettings"} <= returned
    assert {"FileEntry", "FileChange", "Listing", "FilePool", "VersionedPool"} <= returned
    assert returned <= EXPORTED, returned - EXPORTED


def test_every_error_is_in_the_tree_with_a_status() -> None:
    classes = [getattr(errors, n) for n in errors.__all__ if n[0].isupper()]
    for cls in classes:
        assert issubclass(cls, limno.LimnoError)
        assert getattr(limno, cls.__name__) is cls, f"limno does not export {cls.__name__}"
        assert 400 <= errors.http_status(cls.__new__(cls)) < 600
    assert errors.http_status(ValueError()) == 500


def _abstract(cls: type) -> set[str]:
    return set(getattr(cls, "__abstractmethods__", ()))


def test_the_in_process_lake_implements_the_whole_interface() -> None:
    assert issubclass(api.LocalLake, LakeInterface) and issubclass(api.LocalPool, PoolInterface)
    assert issubclass(api.LocalFilePool, FilePoolInterface)
    assert issubclass(api.LocalPool, api.VersionedPool)
    assert issubclass(api.LocalFilePool, api.VersionedPool)
    impls = (api.LocalLake, api.LocalPool, api.LocalFilePool)
    assert all(_abstract(impl) == set() for impl in impls)
    for interface, impl in (
        (LakeInterface, api.LocalLake),
        (PoolInterface, api.LocalPool),
        (FilePoolInterface, api.LocalFilePool),
    ):
        for name in _abstract(interface):
            if isinstance(inspect.getattr_static(interface, name), property):
                assert isinstance(inspect.getattr_static(impl, name), property), name
                continue
            want = inspect.signature(getattr(interface, name))
            have = inspect.signature(getattr(impl, name))
            for p in want.parameters.values():  # every parameter, by name and kind
                assert p.name in have.parameters, f"{impl.__name__}.{name} lacks {p.name}"


def test_lake_open_picks_the_implementation(tmp_path: Path) -> None:
    lake = limno.Lake.init(str(tmp_path / "lake"))
    assert isinstance(lake, api.LocalLake) and isinstance(lake, limno.Lake)
    pool = lake.create_pool("logs", key="ts")
    assert isinstance(pool, limno.Pool)
    pool.load([pa.table({"ts": [2, 1]})])
    assert limno.Lake.open(lake.uri).pool("logs").scan().column("ts").to_pylist() == [1, 2]
    from limno.api.remote import RemoteLake  # a server's client: tests/server

    assert isinstance(limno.Lake.open("http://127.0.0.1:1"), RemoteLake)
    with pytest.raises(limno.NotFoundError, match="unsupported lake location"):
        limno.Lake.open("ftp://example/lake")


def test_pool_settings_are_typed_and_checked() -> None:
    stored = {
        "iterators": {"dedup": True},
        "split_threshold": 20,
        "compaction": {"strategy": "overlap", "batch": 4},
        "retention": {"main": 86400},
        "hooks": [{"name": "h", "event": "pre-commit", "run": "true"}],
    }
    settings = PoolSettings.from_json(stored)
    assert settings.iterators.dedup and settings.split_threshold == 20
    assert settings.compaction == CompactionSettings("overlap", 3.0, 4)
    assert settings.retention["main"].days == 1 and settings.hooks[0].name == "h"
    again = PoolSettings.from_json(settings.to_json())
    assert again == settings
    assert PoolConfig.from_json(PoolConfig("x", "p", settings=settings).to_json()) == PoolConfig(
        "x", "p", settings=settings
    )
    for bad in (
        {"split_threshold": 0},
        {"split_threshold": "many"},
        {"compaction": {"strategy": "magic"}},
        {"compaction": {"ratio": 0.5}},
        {"retention": {"main": -1}},
        {"iterators": {"nonsense": 1}},
    ):
        with pytest.raises(limno.InvalidInputError):
            PoolSettings.from_json(bad)
