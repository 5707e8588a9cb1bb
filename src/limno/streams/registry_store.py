"""A Confluent-compatible schema registry kept in the lake (served by ``limno serve``
under ``/registry``, :mod:`limno.server.routes.registry`).

Avro schemas only (what ``kafka from|to --format avro`` and Confluent's Avro
serializers use); ``schemaType`` JSON and PROTOBUF and schema references are refused.
One :class:`~limno.journal.JournalStore` map under the lake's ``registry/`` prefix
holds it all, so every change is one atomic entry (put-if-absent appends, recomputed
on a race: two servers registering at once never lose one, nor hand out one id twice):

``ids``              ``{"next": n}``: the next schema id
``schema/<id>``      a schema: its text as first registered, its normal form
``normal/<sha256>``  the id of a normal form: the same schema registered twice (under
                     any subject) gets the same id; ids are global and never reused
``subject/<name>``   its versions ``[{version, id, deleted}]``, the next version
                     number, its own compatibility level (None: the global one)
``config``           the global compatibility level (BACKWARD when unset)

Compatibility (``BACKWARD`` by default, ``FORWARD``, ``FULL``, ``NONE`` and the
``*_TRANSITIVE`` forms) is Apache Avro's own reader/writer check
(``avro.compatibility``): BACKWARD means the new schema reads what the latest (every
version, transitive) wrote; FORWARD the reverse; FULL both. Soft-deleted versions
take no part in checks or lookups; a permanent delete needs a soft one first, as in
Confluent's registry. Errors are LimnoErrors carrying Confluent's ``error_code``
(:class:`RegistryError`'s subclasses), which the routes answer in Confluent's JSON.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from limno.errors import AlreadyExistsError, ConflictError, InvalidInputError, NotFoundError
from limno.journal import JournalStore, Put, Remove, StoreState, Update
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import avro.compatibility as avro_compatibility
    import avro.errors as avro_errors
    import avro.schema as avro_schema

    from limno.storage import Storage
else:
    avro_schema = lazy_module("avro.schema")
    avro_errors = lazy_module("avro.errors")
    avro_compatibility = lazy_module("avro.compatibility")

__all__ = ["LEVELS", "PREFIX", "SchemaRegistry", "error_code"]

PREFIX = "registry"
LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
_DEFAULT_LEVEL = "BACKWARD"
_IDS, _SCHEMA, _NORMAL, _SUBJECT, _CONFIG = "ids", "schema/", "normal/", "subject/", "config"


def _error(cls: type[Exception], code: int, message: str) -> Exception:
    err = cls(message)
    err.error_code = code  # type: ignore[attr-defined]
    return err


def error_code(err: Exception) -> int:
    """Confluent's ``error_code`` of an error (its HTTP status when it has none)."""
    code = getattr(err, "error_code", None)
    return int(code) if isinstance(code, int) else int(getattr(err, "status", 500))


def _subject_missing(subject: str) -> Exception:
    return _error(NotFoundError, 40401, f"Subject '{subject}' not found.")


def _version_missing(subject: str, version: object) -> Exception:
    return _error(NotFoundError, 40402, f"Version {version} not found for subject '{subject}'.")


def parse_schema(text: Any, schema_type: Any = None, references: Any = None) -> Any:
    """The parsed Avro schema of a request (Confluent's 42201 when it is not one)."""
    if schema_type not in (None, "AVRO"):
        raise _error(InvalidInputError, 42201, f"Schema type {schema_type} is not supported.")
    if references:
        raise _error(InvalidInputError, 42201, "Schema references are not supported.")
    if not isinstance(text, str):
        raise _error(InvalidInputError, 42201, "Empty schema")
    try:
        return avro_schema.parse(text)
    except (avro_errors.AvroException, ValueError, TypeError) as e:
        raise _error(InvalidInputError, 42201, f"Invalid schema: {e}") from None


def _normal(parsed: Any) -> str:
    """The schema's JSON, keys sorted: one text per schema, whatever spacing and key
    order it was written in (defaults and docs stay: they matter to readers)."""
    return json.dumps(parsed.to_json(), sort_keys=True, separators=(",", ":"))


def _compatible(reader: Any, writer: Any) -> tuple[bool, list[str]]:
    result = avro_compatibility.ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
    ok = result.compatibility == avro_compatibility.SchemaCompatibilityType.compatible
    where = ", ".join(sorted(str(x) for x in result.locations))
    return ok, [] if ok else [f"{', '.join(sorted(map(str, result.messages)))} at {where}"]


class SchemaRegistry:
    """The registry of one lake (see the module docstring)."""

    def __init__(self, storage: Storage) -> None:
        self.journal = JournalStore(storage, PREFIX)

    # -- reading -------------------------------------------------------------------
    def _state(self) -> StoreState:
        return self.journal.state() if self.journal.exists() else StoreState(0, {})

    def _subject(
        self, items: Mapping[str, Any], subject: str, deleted: bool = False
    ) -> dict[str, Any]:
        record = items.get(_SUBJECT + subject)
        live = record and any(deleted or not v["deleted"] for v in record["versions"])
        if not live:
            raise _subject_missing(subject)
        assert record is not None
        return dict(record)

    def schema(self, schema_id: int) -> dict[str, Any]:
        """``{"schema": text}`` of an id (40403 when there is none)."""
        record = self._state().items.get(f"{_SCHEMA}{schema_id}")
        if record is None:
            raise _error(NotFoundError, 40403, f"Schema {schema_id} not found")
        return {"schema": record["schema"]}

    def uses(self, schema_id: int) -> list[dict[str, Any]]:
        """``[{subject, version}]`` of the live versions with this id."""
        self.schema(schema_id)
        return [
            {"subject": k[len(_SUBJECT) :], "version": v["version"]}
            for k, rec in sorted(self._state().items.items())
            if k.startswith(_SUBJECT)
            for v in rec["versions"]
            if v["id"] == schema_id and not v["deleted"]
        ]

    def subjects(self, deleted: bool = False) -> list[str]:
        return [
            k[len(_SUBJECT) :]
            for k, rec in sorted(self._state().items.items())
            if k.startswith(_SUBJECT) and any(deleted or not v["deleted"] for v in rec["versions"])
        ]

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        record = self._subject(self._state().items, subject, deleted)
        return [v["version"] for v in record["versions"] if deleted or not v["deleted"]]

    def _find(self, items: Mapping[str, Any], subject: str, version: str | int) -> dict[str, Any]:
        record = self._subject(items, subject, deleted=True)
        live = [v for v in record["versions"] if not v["deleted"]]
        if str(version) in ("latest", "-1"):
            if not live:
                raise _subject_missing(subject)
            return dict(live[-1])
        try:
            number = int(version)
        except ValueError:
            number = 0
        if number < 1:
            raise _error(
                InvalidInputError,
                42202,
                "The specified version is not a valid version id. Allowed values are "
                'between [1, 2^31-1] and the string "latest"',
            )
        for v in live:
            if v["version"] == number:
                return dict(v)
        raise _version_missing(subject, number)

    def version(self, subject: str, version: str | int) -> dict[str, Any]:
        """``{subject, id, version, schema}`` (``version``: a number, ``latest`` or -1)."""
        items = self._state().items
        found = self._find(items, subject, version)
        text = items[f"{_SCHEMA}{found['id']}"]["schema"]
        return {"subject": subject, "id": found["id"], "version": found["version"], "schema": text}

    def lookup(self, subject: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """The live version of ``subject`` whose schema is the body's (40403: none)."""
        normal = _normal(parse_schema(body.get("schema"), body.get("schemaType")))
        items = self._state().items
        record = self._subject(items, subject)
        known = items.get(_NORMAL + hashlib.sha256(normal.encode()).hexdigest())
        for v in record["versions"]:
            if known is not None and v["id"] == known["id"] and not v["deleted"]:
                text = items[f"{_SCHEMA}{v['id']}"]["schema"]
                return {"subject": subject, "id": v["id"], "version": v["version"], "schema": text}
        raise _error(NotFoundError, 40403, "Schema not found")

    def level(self, subject: str | None = None, default_to_global: bool = True) -> str:
        """The compatibility level of ``subject`` (None: the global one)."""
        items = self._state().items
        if subject is not None:
            own = (items.get(_SUBJECT + subject) or {}).get("compatibility")
            if own is not None:
                return str(own)
            if not default_to_global:
                raise _error(
                    NotFoundError,
                    40408,
                    f"Subject '{subject}' does not have subject-level compatibility configured",
                )
        return str((items.get(_CONFIG) or {}).get("compatibility", _DEFAULT_LEVEL))

    def check(
        self, subject: str, version: str | int, body: Mapping[str, Any]
    ) -> tuple[bool, list[str]]:
        """Whether the body's schema is compatible with ``version`` of ``subject`` (with
        every live version, for a transitive level and ``version`` latest), and why not."""
        parsed = parse_schema(body.get("schema"), body.get("schemaType"))
        items = self._state().items
        if _SUBJECT + subject not in items:
            return True, []  # nothing to be compatible with
        level = self.level(subject)
        found = self._find(items, subject, version)
        record = items[_SUBJECT + subject]
        if level.endswith("_TRANSITIVE") and str(version) in ("latest", "-1"):
            ids = [v["id"] for v in record["versions"] if not v["deleted"]]
        else:
            ids = [found["id"]]
        return self._against(items, parsed, ids, level)

    def _against(
        self, items: Mapping[str, Any], new: Any, ids: list[int], level: str
    ) -> tuple[bool, list[str]]:
        messages: list[str] = []
        for schema_id in ids:
            old = avro_schema.parse(items[f"{_SCHEMA}{schema_id}"]["schema"])
            checks = []
            if level.startswith(("BACKWARD", "FULL")):
                checks.append(("reading", new, old))  # the new reads the old's data
            if level.startswith(("FORWARD", "FULL")):
                checks.append(("read by", old, new))
            for _, reader, writer in checks:
                ok, why = _compatible(reader, writer)
                messages += [f"{level}: {m} (against schema id {schema_id})" for m in why]
        return not messages, messages

    # -- writing -------------------------------------------------------------------
    def _commit(self, updates: Any, meta: Mapping[str, Any]) -> StoreState:
        if not self.journal.exists():
            with contextlib.suppress(AlreadyExistsError):  # another writer made it
                self.journal.create()
        return self.journal.commit(updates, meta=meta)

    def register(self, subject: str, body: Mapping[str, Any]) -> int:
        """Register the body's schema under ``subject``: its id (the existing one when the
        subject has it already; 409 when the subject's level refuses it)."""
        parsed = parse_schema(body.get("schema"), body.get("schemaType"), body.get("references"))
        normal = _normal(parsed)
        digest = _NORMAL + hashlib.sha256(normal.encode()).hexdigest()
        text = str(body["schema"])
        found: list[int] = []
        # already registered (a serializer registers at each start): answered without
        # appending an empty entry to the journal
        items = self._state().items
        known = items.get(digest)
        record = items.get(_SUBJECT + subject) or {"versions": []}
        for v in record["versions"]:
            if known is not None and v["id"] == known["id"] and not v["deleted"]:
                return int(v["id"])

        def change(state: StoreState) -> list[Update]:
            items = state.items
            record = dict(items.get(_SUBJECT + subject) or {"versions": [], "next": 1})
            known = items.get(digest)
            live = [v for v in record["versions"] if not v["deleted"]]
            for v in live:
                if known is not None and v["id"] == known["id"]:
                    found[:] = [v["id"]]
                    return []
            updates: list[Update] = []
            if known is None:
                schema_id = int((items.get(_IDS) or {}).get("next", 1))
                updates += [
                    Put(_IDS, {"next": schema_id + 1}),
                    Put(f"{_SCHEMA}{schema_id}", {"schema": text, "normal": normal}),
                    Put(digest, {"id": schema_id}),
                ]
            else:
                schema_id = int(known["id"])
            level = self.level(subject) if live else "NONE"
            if level != "NONE":
                against = live if level.endswith("_TRANSITIVE") else live[-1:]
                ok, why = self._against(items, parsed, [v["id"] for v in against], level)
                if not ok:
                    raise _error(
                        ConflictError,
                        409,
                        "Schema being registered is incompatible with an earlier schema for "
                        f'subject "{subject}", details: {"; ".join(why)}',
                    )
            number = int(record["next"])
            record["versions"] = [
                *record["versions"],
                {"version": number, "id": schema_id, "deleted": False},
            ]
            record["next"] = number + 1
            found[:] = [schema_id]
            return [*updates, Put(_SUBJECT + subject, record)]

        self._commit(change, {"registry": f"register {subject}"})
        return found[0]

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        """Soft-delete the subject's live versions (or, ``permanent``, remove the
        soft-deleted subject for good): the version numbers deleted."""
        gone: list[int] = []

        def change(state: StoreState) -> list[Update]:
            record = state.items.get(_SUBJECT + subject)
            if record is None:
                raise _subject_missing(subject)
            live = [v for v in record["versions"] if not v["deleted"]]
            if permanent:
                if live:
                    raise _error(
                        NotFoundError,  # Confluent answers 404 here
                        40405,
                        f"Subject '{subject}' was not deleted first before being permanently "
                        "deleted",
                    )
                gone[:] = [v["version"] for v in record["versions"]]
                return [Remove(_SUBJECT + subject)]
            if not live:
                raise _error(
                    NotFoundError,
                    40404,
                    f"Subject '{subject}' was soft deleted.Set permanent=true to delete "
                    "permanently",
                )
            gone[:] = [v["version"] for v in live]
            versions = [{**v, "deleted": True} for v in record["versions"]]
            return [Put(_SUBJECT + subject, {**record, "versions": versions})]

        self._commit(change, {"registry": f"delete {subject}"})
        return gone

    def delete_version(self, subject: str, version: str, permanent: bool = False) -> int:
        """Soft-delete one version (``permanent``: remove a soft-deleted one)."""
        gone: list[int] = []

        def change(state: StoreState) -> list[Update]:
            items = state.items
            record = self._subject(items, subject, deleted=True)
            if permanent:
                number = int(version) if version.lstrip("-").isdigit() else 0
                match = [v for v in record["versions"] if v["version"] == number]
                if not match:
                    raise _version_missing(subject, version)
                if not match[0]["deleted"]:
                    raise _error(
                        NotFoundError,
                        40407,
                        f"Subject '{subject}' Version {number} was not deleted first before "
                        "being permanently deleted",
                    )
                versions = [v for v in record["versions"] if v["version"] != number]
            else:
                number = self._find(items, subject, version)["version"]
                versions = [
                    {**v, "deleted": v["deleted"] or v["version"] == number}
                    for v in record["versions"]
                ]
            gone[:] = [number]
            return [Put(_SUBJECT + subject, {**record, "versions": versions})]

        self._commit(change, {"registry": f"delete {subject} version {version}"})
        return gone[0]

    def set_level(self, level: Any, subject: str | None = None) -> str:
        """Set the compatibility level of ``subject`` (None: the global one)."""
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise _error(InvalidInputError, 42203, f"Invalid compatibility level: {level}")
        chosen = level.upper()

        def change(state: StoreState) -> list[Update]:
            if subject is None:
                return [Put(_CONFIG, {"compatibility": chosen})]
            record = state.items.get(_SUBJECT + subject) or {"versions": [], "next": 1}
            return [Put(_SUBJECT + subject, {**record, "compatibility": chosen})]

        self._commit(change, {"registry": f"config {subject or '(global)'} {chosen}"})
        return chosen

    def delete_level(self, subject: str) -> str:
        """Drop the subject's own level (it follows the global one again): the old one."""
        old = self.level(subject, default_to_global=False)

        def change(state: StoreState) -> list[Update]:
            record = state.items.get(_SUBJECT + subject)
            if record is None:
                return []
            return [Put(_SUBJECT + subject, {**record, "compatibility": None})]

        self._commit(change, {"registry": f"config {subject} deleted"})
        return old
