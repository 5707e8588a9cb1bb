"""Scan bounds given as lists, in process and through a server (``lake``'s two params).

A list bound once read as a single value of the first key field (a list, which no
key holds), so ``scan(start=[2])`` silently matched nothing; a list or tuple is now
the values of the key's first fields, and one with no value or more values than the
key has fields is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from limno import Lake
from limno.api.remote import RemoteLake
from limno.errors import InvalidInputError
from server_support import served


@pytest.fixture(params=["local", "served"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lake]:
    """Pools ``one`` (key k: 1..4) and ``two`` (key tenant,ts: a1 a2 b1 b2), opened by
    path or through a server on it."""
    path = str(tmp_path / "lake")
    local = Lake.init(path)
    local.create_pool("one", key="k").load([pa.table({"k": [1, 2, 3, 4]})])
    two = pa.table({"tenant": ["a", "a", "b", "b"], "ts": [1, 2, 1, 2]})
    local.create_pool("two", key="tenant,ts").load([two])
    if request.param == "local":
        yield local
        return
    with served(path) as url:
        remote = Lake.open(url)
        assert isinstance(remote, RemoteLake)
        with remote:
            yield remote


def _keys(table: pa.Table) -> list[Any]:
    names = [n for n in ("k", "tenant", "ts") if n in table.column_names]
    rows = table.select(names).to_pylist()
    return [r["k"] if "k" in r else (r["tenant"], r["ts"]) for r in rows]


def test_a_list_bound_of_a_one_field_key_is_its_value(lake: Lake) -> None:
    one = lake.pool("one")
    assert _keys(one.scan(start=[2], end=[4])) == [2, 3]
    assert _keys(one.scan(start=(2,), end=(4,))) == [2, 3]
    assert _keys(one.scan(start=2, end=4)) == [2, 3]
    assert _keys(pa.concat_tables(one.iter_scan(start=[3]))) == [3, 4]
    assert _keys(one.get([[2], (3,), 4])) == [2, 3, 4]


def test_list_bounds_of_a_composite_key_are_full_keys_or_prefixes(lake: Lake) -> None:
    two = lake.pool("two")
    assert _keys(two.scan(start=["a", 2])) == [("a", 2), ("b", 1), ("b", 2)]
    assert _keys(two.scan(start=["a", 2], end=["b", 2])) == [("a", 2), ("b", 1)]
    assert _keys(two.scan(start=["b"])) == [("b", 1), ("b", 2)]  # a prefix
    assert _keys(two.scan(end=["b"])) == [("a", 1), ("a", 2)]
    assert _keys(two.scan(start=("a", 2), end=("b", 2))) == [("a", 2), ("b", 1)]
    assert _keys(two.scan(ranges=[(["a", 2], ["b", 2])])) == [("a", 2), ("b", 1)]
    assert _keys(two.get([["b", 1]])) == [("b", 1)]


@pytest.mark.parametrize(
    ("pool", "bound", "said"),
    [
        ("one", [2, 3], "bound [2, 3]: expected 1 value for key k"),
        ("one", (2, 3), "bound (2, 3): expected 1 value for key k"),
        ("two", ["a", 1, 5], "bound ['a', 1, 5]: expected 1 to 2 values for key tenant,ts"),
        ("two", [], "bound []: expected 1 to 2 values for key tenant,ts"),
        ("two", (), "bound (): expected 1 to 2 values for key tenant,ts"),
    ],
)
def test_a_bound_of_the_wrong_arity_is_refused(
    lake: Lake, pool: str, bound: Any, said: str
) -> None:
    for bounds in ({"start": bound}, {"end": bound}):
        with pytest.raises(InvalidInputError) as e:
            lake.pool(pool).scan(**bounds)
        assert str(e.value) == said
    with pytest.raises(InvalidInputError, match="expected 1"):
        lake.pool(pool).get([bound])
