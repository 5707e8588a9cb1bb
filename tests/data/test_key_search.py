"""A lookup's shortcuts within one object (limno.data.key_search): numpy's binary
search gives the rows the SortKey comparison gives, and steps aside where numeric
order is not the pool's; an object's row-group ranges are computed once."""

from __future__ import annotations

import bisect
from pathlib import Path

import pyarrow as pa
import pytest

from limno import Lake
from limno.data import key_search
from limno.data.keys import PoolKey


def _compared(keys: pa.Table, key: PoolKey, wanted: list[int]) -> list[range]:
    """The spans by SortKey comparisons (the general path's order)."""
    held = [key.sort_key(key.row_key(keys, i)) for i in range(keys.num_rows)]
    out = []
    for w in wanted:
        s = key.sort_key((w,))
        out.append(range(bisect.bisect_left(held, s), bisect.bisect_right(held, s)))
    return out


@pytest.mark.parametrize("typ", [pa.int64(), pa.int8(), pa.uint16(), pa.uint64()])
def test_spans_are_the_compared_ones(typ: pa.DataType) -> None:
    """Repeated, absent, first and last keys: the same rows as comparing SortKeys."""
    key = PoolKey.parse("k")
    values = [0, 1, 1, 1, 5, 7, 7, 9, 100, 120]
    if not pa.types.is_unsigned_integer(typ):
        values = [-100, -3, *values]
    keys = key.key_table(pa.table({"k": pa.array(values, typ)}))
    wanted = sorted({values[0], 1, 2, 7, 120, values[-1] + 1, *values[:2]})
    found = key_search.spans(keys, key, keys.num_rows, [key.sort_key((w,)) for w in wanted])
    assert found == _compared(keys, key, wanted)


def test_spans_step_aside() -> None:
    """A value the column's type cannot hold, a descending key, a text key, a key of
    two fields, a non-integer wanted value: None (the SortKey comparison decides)."""
    small = PoolKey.parse("k")
    keys = small.key_table(pa.table({"k": pa.array([1, 2, 3], pa.uint8())}))
    assert key_search.spans(keys, small, 3, [small.sort_key((300,))]) is None
    assert key_search.spans(keys, small, 3, [small.sort_key((-1,))]) is None
    assert key_search.spans(keys, small, 3, [small.sort_key((1.0,))]) is None
    wide = small.key_table(pa.table({"k": pa.array([1, 2, 3], pa.int64())}))
    assert key_search.spans(wide, small, 3, [small.sort_key((2**63,))]) is None
    down = PoolKey.parse("k:desc")
    assert key_search.spans(wide, down, 3, [down.sort_key((2,))]) is None
    text = small.key_table(pa.table({"k": ["a", "b"]}))
    assert key_search.spans(text, small, 2, [small.sort_key(("a",))]) is None
    two = PoolKey.parse("k,j")
    both = two.key_table(pa.table({"k": [1, 2], "j": [1, 2]}))
    assert key_search.spans(both, two, 2, [two.sort_key((1, 1))]) is None


@pytest.mark.parametrize(("spec", "typ"), [("k", pa.uint8()), ("k:desc", pa.int64())])
def test_lookups_through_either_way(tmp_path: Path, spec: str, typ: pa.DataType) -> None:
    """A pool keyed by a small unsigned integer (out-of-range keys asked) and one by
    a descending key: every lookup the rows the pool holds, none for the rest."""
    pool = Lake.init(str(tmp_path / "lake")).create_pool("p", key=spec)
    ks = list(range(0, 250, 3))
    pool.load([pa.table({"k": pa.array(ks, typ), "v": [f"v{k}" for k in ks]})])
    asked = [0, 3, 4, 249, 255, 300, -1]
    got = pool.get(asked)
    held = sorted((k for k in asked if k in ks), reverse=spec.endswith(":desc"))
    assert got.column("k").to_pylist() == held
    assert got.column("v").to_pylist() == [f"v{k}" for k in held]


def test_ranges_are_computed_once_per_object() -> None:
    """The same object: computed once; another size or key: computed again."""
    made: list[int] = []

    def compute() -> list[int]:
        made.append(1)
        return [len(made)]

    ident = ("file:///lake-ks", "pool/data/obj.parquet", 123, "k")
    assert key_search.remembered_ranges(ident, compute) == [1]
    assert key_search.remembered_ranges(ident, compute) == [1]
    assert key_search.remembered_ranges((*ident[:2], 124, "k"), compute) == [2]
    assert key_search.remembered_ranges((*ident[:3], "k:desc"), compute) == [3]
    assert len(made) == 3


def test_spans_of_sliced_and_chunked_keys() -> None:
    """Keys that start inside their buffer (a slice) or span chunks: the same rows."""
    key = PoolKey.parse("k")
    whole = pa.array([5, 1, 2, 2, 4, 7, 7, 9], pa.int32()).slice(1)
    for given in (
        pa.table({"k": whole}),
        pa.table({"k": pa.chunked_array([whole.slice(0, 3), whole.slice(3)])}),
    ):
        keys = key.key_table(given)
        wanted = [1, 2, 3, 7, 9]
        sort_keys = [key.sort_key((w,)) for w in wanted]
        assert key_search.spans(keys, key, keys.num_rows, sort_keys) == _compared(keys, key, wanted)


def test_the_least_recently_used_object_is_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MOST_OBJECTS, the object read longest ago is computed again; a recent one
    is not."""
    monkeypatch.setattr(key_search, "MOST_OBJECTS", 2)
    made: list[str] = []

    def compute(name: str) -> str:
        made.append(name)
        return name

    idents = {n: ("file:///lru", f"pool/data/{n}.parquet", 1, "k") for n in "abc"}
    key_search.remembered_ranges(idents["a"], lambda: compute("a"))
    key_search.remembered_ranges(idents["b"], lambda: compute("b"))
    key_search.remembered_ranges(idents["a"], lambda: compute("a"))  # a: used last
    key_search.remembered_ranges(idents["c"], lambda: compute("c"))  # b forgotten
    key_search.remembered_ranges(idents["a"], lambda: compute("a"))
    key_search.remembered_ranges(idents["b"], lambda: compute("b"))
    assert made == ["a", "b", "c", "b"]
