"""The registry store's writes (limno.streams.registry_store): two server workers
registering at once (two :class:`SchemaRegistry` of one lake, as two processes of
``limno serve`` have) lose no registration, hand out no id twice and give one schema
one id; registering again writes nothing."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from limno.storage import open_storage
from limno.streams.registry_store import SchemaRegistry


def _schema(n: int) -> str:
    return json.dumps(
        {"type": "record", "name": f"R{n}", "fields": [{"name": "id", "type": "long"}]}
    )


def test_concurrent_registrations_get_distinct_stable_ids(tmp_path: Path) -> None:
    workers = [SchemaRegistry(open_storage(str(tmp_path), create=True)) for _ in range(2)]
    got: dict[tuple[int, int], int] = {}
    failures: list[BaseException] = []

    def register(w: int) -> None:
        try:
            for n in range(8):  # each worker: the same 8 schemas, each under its own subject
                got[(w, n)] = workers[w].register(f"s{n}-w{w}", {"schema": _schema(n)})
        except BaseException as e:  # noqa: BLE001 (reported by the test)
            failures.append(e)

    threads = [threading.Thread(target=register, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures and len(got) == 16
    for n in range(8):
        assert got[(0, n)] == got[(1, n)]  # one schema, one id
    ids = sorted({got[(0, n)] for n in range(8)})
    assert ids == list(range(1, 9))  # none handed out twice, none skipped
    for n in range(8):
        assert json.loads(workers[1].schema(got[(0, n)])["schema"]) == json.loads(_schema(n))
    assert len(workers[0].subjects()) == 16  # no registration lost


def test_registering_again_writes_nothing(tmp_path: Path) -> None:
    """A schema registered again under its subject (every serializer's start) answers
    its id and appends nothing to the lake's journal."""
    registry = SchemaRegistry(open_storage(str(tmp_path), create=True))
    first = registry.register("a-value", {"schema": _schema(1)})
    head = registry.journal.journal.head()
    assert registry.register("a-value", {"schema": _schema(1)}) == first
    assert registry.journal.journal.head() == head
