"""A client of a Confluent-compatible schema registry (limno's own under ``limno serve
.../registry``, or Confluent's): the two calls Avro in Kafka needs, schema by id
(cached: an id never changes its schema) and register under a subject.

The registry is ``--registry URL``, else ``$LIMNO_SCHEMA_REGISTRY``; credentials, when
``$LIMNO_ACCESS_KEY_ID`` and ``$LIMNO_SECRET_ACCESS_KEY`` are set, go as HTTP Basic
(what ``limno serve`` checks; Confluent's registry takes the same header).
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from limno.errors import InvalidInputError, LimnoError, NotFoundError

__all__ = ["REGISTRY_ENV", "RegistryClient", "registry_url"]

REGISTRY_ENV = "LIMNO_SCHEMA_REGISTRY"
_TIMEOUT = 30.0
_CONTENT = "application/vnd.schemaregistry.v1+json"


def registry_url(flag: str | None) -> str:
    """The registry's URL: ``flag``, else ``$LIMNO_SCHEMA_REGISTRY`` (required)."""
    found = flag or os.environ.get(REGISTRY_ENV, "").strip()
    if not found:
        raise InvalidInputError(
            f"no schema registry: pass --registry URL or set {REGISTRY_ENV} (limno serve "
            "has one at http://HOST:PORT/registry)"
        )
    return found.rstrip("/")


class RegistryClient:
    """Schemas by id (each fetched once) and registering. No connection is kept between
    calls (there are few: one per schema id), so there is nothing to close."""

    def __init__(self, url: str) -> None:
        key = os.environ.get("LIMNO_ACCESS_KEY_ID")
        secret = os.environ.get("LIMNO_SECRET_ACCESS_KEY")
        self.auth = httpx.BasicAuth(key, secret) if key and secret else None
        self.url = url
        self.schemas: dict[int, str] = {}

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        headers = {"Content-Type": _CONTENT} if body is not None else None
        try:
            with httpx.Client(auth=self.auth, timeout=_TIMEOUT) as http:
                r = http.request(method, self.url + path, json=body, headers=headers)
        except httpx.HTTPError as e:
            raise LimnoError(f"schema registry at {self.url}: {e}") from None
        if r.status_code == 200:
            return r.json()
        try:
            doc = r.json()
            why = doc.get("message") or doc.get("detail") or r.text
            code = doc.get("error_code")
        except (ValueError, AttributeError):
            why, code = r.text, None
        # NotFoundError only for the registry's own "not found" (Confluent's 404xx code):
        # a 404 without one is a URL that is no registry (``--registry`` missing its
        # ``/registry``), which must stop the sync, not make every message undecodable
        if r.status_code == 404 and isinstance(code, int) and code // 100 == 404:
            raise NotFoundError(f"schema registry at {self.url}: {why} (HTTP 404)")
        hint = " (not a schema registry?)" if r.status_code == 404 else ""
        raise LimnoError(f"schema registry at {self.url}: {why} (HTTP {r.status_code}){hint}")

    def schema(self, schema_id: int) -> str:
        """The schema text of an id (NotFoundError: the registry has no such id)."""
        found = self.schemas.get(schema_id)
        if found is None:
            found = self.schemas[schema_id] = str(
                self._call("GET", f"/schemas/ids/{schema_id}")["schema"]
            )
        return found

    def register(self, subject: str, schema: str) -> int:
        """The id of ``schema`` registered under ``subject`` (the existing one when it is)."""
        return int(self._call("POST", f"/subjects/{subject}/versions", {"schema": schema})["id"])
