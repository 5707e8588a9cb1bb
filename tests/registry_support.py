"""confluent-kafka's ``SchemaRegistryClient`` pointed at the registry of a test
``limno serve`` (``/registry``), with a user's key as HTTP Basic credentials."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka.schema_registry import SchemaRegistryClient

from git_scenarios import init_lake
from server_support import Served, start_server

__all__ = ["registry_client", "serving_registry"]


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
