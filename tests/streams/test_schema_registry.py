"""The schema registry of ``limno serve`` (``/registry``) driven by confluent-kafka's own
``SchemaRegistryClient`` and Avro serializers, against one real server process for the
module: ids, subjects, versions, compatibility levels, deletes, Confluent's error
codes, auth, and the registry kept in the lake."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka.serialization import MessageField, SerializationContext

from limno.api.local import LocalLake
from limno.streams.registry_store import SchemaRegistry
from registry_support import (
    AvroDeserializer,
    AvroSerializer,
    Schema,
    SchemaRegistryError,
    registry_client,
    serving_registry,
)
from server_support import Served, served_user

pytestmark = pytest.mark.usefixtures("isolated_home")


def record(*fields: dict[str, Any], name: str = "Order") -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})


ID = {"name": "id", "type": "long"}
NAME = {"name": "name", "type": "string"}
NOTE = {"name": "note", "type": ["null", "string"], "default": None}
V1 = record(ID, NAME)
V2 = record(ID, NAME, NOTE)  # adds a field with a default: backward compatible
BREAKS = record(ID, NAME, {"name": "must", "type": "int"})  # a new field without default


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving_registry(tmp_path_factory.mktemp("registry")) as served:
        yield served


def code_of(call: Any) -> tuple[int, int]:
    with pytest.raises(SchemaRegistryError) as info:
        call()
    return info.value.http_status_code, info.value.error_code


def test_register_look_up_and_versions(server: Served) -> None:
    with registry_client(server) as sr:
        first = sr.register_schema("orders-value", Schema(V1, "AVRO"))
        assert sr.register_schema("orders-value", Schema(V1, "AVRO")) == first
        spaced = json.dumps(json.loads(V1), indent=2)  # the same schema, written otherwise
        assert sr.register_schema("other-value", Schema(spaced, "AVRO")) == first  # global
        second = sr.register_schema("orders-value", Schema(V2, "AVRO"))
        assert second != first
        assert json.loads(sr.get_schema(first).schema_str) == json.loads(V1)
        assert sr.get_subjects() == ["orders-value", "other-value"]
        assert sr.get_versions("orders-value") == [1, 2]
        latest = sr.get_latest_version("orders-value")
        assert (latest.schema_id, latest.version) == (second, 2)
        assert sr.get_version("orders-value", 1).schema_id == first
        found = sr.lookup_schema("orders-value", Schema(V2, "AVRO"))
        assert (found.schema_id, found.version) == (second, 2)
        versions = httpx.get(
            f"{server.url}/registry/schemas/ids/{first}/versions", auth=server.auth
        ).json()
        assert versions == [
            {"subject": "orders-value", "version": 1},
            {"subject": "other-value", "version": 1},
        ]
        # Confluent's error codes
        assert code_of(lambda: sr.get_versions("nope")) == (404, 40401)
        assert code_of(lambda: sr.get_version("orders-value", 9)) == (404, 40402)
        assert code_of(lambda: sr.get_schema(999)) == (404, 40403)
        bad = Schema('{"type": "record", "name": "x"}', "AVRO")  # no fields
        assert code_of(lambda: sr.register_schema("orders-value", bad)) == (422, 42201)
    # kept in the lake: the same ids as the server handed out
    kept = SchemaRegistry(LocalLake.open(server.lake).storage)
    assert kept.version("orders-value", "latest")["id"] == second


def test_compatibility_levels(server: Served) -> None:
    with registry_client(server) as sr:
        sr.register_schema("levels-value", Schema(V1, "AVRO"))
        assert sr.get_compatibility() == "BACKWARD"
        assert not sr.test_compatibility("levels-value", Schema(BREAKS, "AVRO"))
        assert sr.test_compatibility("levels-value", Schema(V2, "AVRO"))
        status, code = code_of(lambda: sr.register_schema("levels-value", Schema(BREAKS, "AVRO")))
        assert (status, code) == (409, 409)
        # FORWARD: the old schema must read the new one's data; dropping NAME breaks it
        sr.set_compatibility("levels-value", "FORWARD")
        assert sr.get_compatibility("levels-value") == "FORWARD"
        assert not sr.test_compatibility("levels-value", Schema(record(ID), "AVRO"))
        assert sr.test_compatibility("levels-value", Schema(BREAKS, "AVRO"))
        sr.set_compatibility("levels-value", "NONE")
        assert sr.register_schema("levels-value", Schema(record(ID), "AVRO")) > 0
        # transitive: against every version, not only the latest
        sr.set_compatibility("levels-value", "BACKWARD_TRANSITIVE")
        with_name = record(ID, {"name": "name", "type": "string", "default": ""})
        assert sr.register_schema("levels-value", Schema(with_name, "AVRO")) > 0
        sr.set_compatibility("levels-value", "FULL_TRANSITIVE")
        assert not sr.test_compatibility("levels-value", Schema(BREAKS, "AVRO"))
        assert code_of(lambda: sr.set_compatibility("levels-value", "SOMETIMES")) == (422, 42203)
        assert sr.get_compatibility() == "BACKWARD"  # the global level is untouched


def test_deletes(server: Served) -> None:
    with registry_client(server) as sr:
        sr.register_schema("gone-value", Schema(V1, "AVRO"))
        sr.register_schema("gone-value", Schema(V2, "AVRO"))
        assert sr.delete_version("gone-value", 2) == 2
        assert sr.get_versions("gone-value") == [1]
        assert code_of(lambda: sr.delete_subject("gone-value", permanent=True)) == (404, 40405)
        assert sr.delete_subject("gone-value") == [1]
        assert "gone-value" not in sr.get_subjects()
        assert code_of(lambda: sr.delete_subject("gone-value")) == (404, 40404)
        assert sr.delete_subject("gone-value", permanent=True) == [1, 2]
        again = sr.register_schema("gone-value", Schema(V1, "AVRO"))
        assert sr.get_versions("gone-value") == [1] and sr.get_schema(again)


def test_avro_serializer_and_deserializer(server: Served) -> None:
    with registry_client(server) as sr:
        serialize = AvroSerializer(sr, V2)
        ctx = SerializationContext("ser", MessageField.VALUE)
        data = serialize({"id": 7, "name": "seven", "note": None}, ctx)
        assert data is not None and data[0] == 0  # Confluent's wire format: magic byte 0
        schema_id = int.from_bytes(data[1:5], "big")
        assert sr.get_latest_version("ser-value").schema_id == schema_id
    with registry_client(server) as fresh:  # nothing cached: the schema comes from the registry
        assert AvroDeserializer(fresh)(data, ctx) == {"id": 7, "name": "seven", "note": None}


def test_auth_readers_read_writers_write(server: Served) -> None:
    reader = served_user(server, "ana", "analyst")
    with registry_client(server) as sr:
        sr.register_schema("auth-value", Schema(V1, "AVRO"))
    with registry_client(server, reader) as sr:
        assert "auth-value" in sr.get_subjects()
        status, _ = code_of(lambda: sr.register_schema("auth-value", Schema(V2, "AVRO")))
        assert status == 403
    anonymous = httpx.get(f"{server.url}/registry/subjects")
    assert anonymous.status_code == 401
