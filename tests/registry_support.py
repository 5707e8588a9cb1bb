"""confluent-kafka's ``SchemaRegistryClient`` pointed at the registry of a test
``limno serve`` (``/registry``), with a user's key as HTTP Basic credentials."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path

from git_scenarios import init_lake
from server_support import Served, start_server

with warnings.catch_warnings():
    # authlib, which the registry client imports, warns that its httpx shim is
    # deprecated, having put "always" for its warnings first in the filter list (so
    # pyproject's filterwarnings cannot quiet it): only that warning, only here
    import authlib.deprecate  # type: ignore[import-untyped]  # noqa: F401 -- its filter, then ours

    warnings.filterwarnings("ignore", "The httpx module is deprecated", DeprecationWarning)
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

__all__ = [
    "AvroDeserializer",
    "AvroSerializer",
    "Schema",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "registry_client",
    "serving_registry",
]


@contextlib.contextmanager
def serving_registry(directory: Path) -> Iterator[Served]:
    """``limno serve`` (with auth) of a new lake in ``directory``; it must exit 0."""
    served = start_server(init_lake(str(directory / "lake")))
    try:
        yield served
    finally:
        assert served.stop() == 0


def registry_client(server: Served, env: dict[str, str] | None = None) -> SchemaRegistryClient:
    """A client of ``server``'s registry as the admin (or the user whose ``env`` it is)."""
    creds = env or server.env
    key, secret = creds["LIMNO_ACCESS_KEY_ID"], creds["LIMNO_SECRET_ACCESS_KEY"]
    return SchemaRegistryClient(
        {"url": f"{server.url}/registry", "basic.auth.user.info": f"{key}:{secret}"}
    )
