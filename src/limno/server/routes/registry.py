"""A Confluent-compatible schema registry under ``/registry`` (the lake's, kept by
:mod:`limno.streams.registry_store`): point Confluent's clients, serializers and Kafka
Connect's AvroConverter at ``http://HOST:PORT/registry``.

The endpoints Confluent's ``SchemaRegistryClient`` and Avro(De)Serializer use, with
Confluent's answers, errors in Confluent's shape (``{"error_code": 40401, "message":
...}``, HTTP status from the code). Who may call them (:mod:`..authorization`): reads
need ``read`` on the lake, changes (register, delete, set a level) ``write`` on the
lake; a refused or unauthenticated request is answered as every other route's
(problem+json), which Confluent's client reports with its HTTP status.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse

from limno.errors import LimnoError
from limno.streams.registry_store import SchemaRegistry, error_code

__all__ = ["router"]

router = APIRouter(prefix="/registry", tags=["schema registry"])

_P = ParamSpec("_P")
_T = TypeVar("_T")
_Doc = dict[str, Any]
_BODY = Body(default_factory=dict)


def _confluent(route: Callable[_P, _T]) -> Callable[_P, _T | JSONResponse]:
    """Answer the route's LimnoErrors in Confluent's error shape."""

    @functools.wraps(route)
    def answered(*args: _P.args, **kwargs: _P.kwargs) -> _T | JSONResponse:
        try:
            return route(*args, **kwargs)
        except LimnoError as e:
            code = error_code(e)
            status = code // 100 if code >= 1000 else code
            return JSONResponse({"error_code": code, "message": str(e)}, status_code=status)

    return answered


def _registry(request: Request) -> SchemaRegistry:
    state = request.app.state
    found: SchemaRegistry | None = getattr(state, "schema_registry", None)
    if found is None:
        found = state.schema_registry = SchemaRegistry(state.lake.storage)
    return found


@router.get("/", operation_id="registry_root", summary="The registry answers")
def root() -> _Doc:
    return {}


@router.get("/schemas/types", operation_id="registry_types", summary="Schema types")
def types() -> list[str]:
    return ["AVRO"]


@router.get("/schemas/ids/{schema_id}", operation_id="registry_schema", summary="A schema by id")
@_confluent
def schema(request: Request, schema_id: int) -> _Doc:
    return _registry(request).schema(schema_id)


@router.get(
    "/schemas/ids/{schema_id}/versions",
    operation_id="registry_schema_versions",
    summary="Subjects and versions of a schema id",
)
@_confluent
def schema_versions(request: Request, schema_id: int) -> list[_Doc]:
    return _registry(request).uses(schema_id)


@router.get("/subjects", operation_id="registry_subjects", summary="Subjects")
@_confluent
def subjects(request: Request, deleted: bool = False) -> list[str]:
    return _registry(request).subjects(deleted)


@router.post("/subjects/{subject}", operation_id="registry_lookup", summary="Look a schema up")
@_confluent
def lookup(request: Request, subject: str, body: _Doc = _BODY) -> _Doc:
    return _registry(request).lookup(subject, body)


@router.delete("/subjects/{subject}", operation_id="registry_delete_subject", summary="Delete")
@_confluent
def delete_subject(request: Request, subject: str, permanent: bool = False) -> list[int]:
    return _registry(request).delete_subject(subject, permanent)


@router.get("/subjects/{subject}/versions", operation_id="registry_versions", summary="Versions")
@_confluent
def versions(request: Request, subject: str, deleted: bool = False) -> list[int]:
    return _registry(request).versions(subject, deleted)


@router.post("/subjects/{subject}/versions", operation_id="registry_register", summary="Register")
@_confluent
def register(request: Request, subject: str, body: _Doc = _BODY) -> _Doc:
    return {"id": _registry(request).register(subject, body)}


@router.get(
    "/subjects/{subject}/versions/{version}", operation_id="registry_version", summary="Version"
)
@_confluent
def version(request: Request, subject: str, version: str) -> _Doc:
    return _registry(request).version(subject, version)


@router.get(
    "/subjects/{subject}/versions/{version}/schema",
    operation_id="registry_version_schema",
    summary="A version's schema text",
)
@_confluent
def version_schema(request: Request, subject: str, version: str) -> Any:
    return json.loads(_registry(request).version(subject, version)["schema"])


@router.delete(
    "/subjects/{subject}/versions/{version}",
    operation_id="registry_delete_version",
    summary="Delete a version",
)
@_confluent
def delete_version(request: Request, subject: str, version: str, permanent: bool = False) -> int:
    return _registry(request).delete_version(subject, version, permanent)


@router.get("/config", operation_id="registry_config", summary="The global level")
@_confluent
def config(request: Request) -> _Doc:
    return {"compatibilityLevel": _registry(request).level()}


@router.put("/config", operation_id="registry_set_config", summary="Set the global level")
@_confluent
def set_config(request: Request, body: _Doc = _BODY) -> _Doc:
    return {"compatibility": _registry(request).set_level(body.get("compatibility"))}


@router.get("/config/{subject}", operation_id="registry_subject_config", summary="A level")
@_confluent
def subject_config(request: Request, subject: str, defaultToGlobal: bool = False) -> _Doc:  # noqa: N803
    return {"compatibilityLevel": _registry(request).level(subject, defaultToGlobal)}


@router.put("/config/{subject}", operation_id="registry_set_subject_config", summary="Set one")
@_confluent
def set_subject_config(request: Request, subject: str, body: _Doc = _BODY) -> _Doc:
    return {"compatibility": _registry(request).set_level(body.get("compatibility"), subject)}


@router.delete(
    "/config/{subject}", operation_id="registry_delete_subject_config", summary="Unset one"
)
@_confluent
def delete_subject_config(request: Request, subject: str) -> _Doc:
    return {"compatibilityLevel": _registry(request).delete_level(subject)}


@router.post(
    "/compatibility/subjects/{subject}/versions/{version}",
    operation_id="registry_compatibility",
    summary="Test a schema against a version",
)
@_confluent
def compatibility(
    request: Request, subject: str, version: str, verbose: bool = False, body: _Doc = _BODY
) -> _Doc:
    ok, why = _registry(request).check(subject, version, body)
    return {"is_compatible": ok, **({"messages": why} if verbose else {})}
