"""User iterators (``python(CLASS)``): parsing and storing, the same answers as the
built-in iterators they imitate (streams, scans, lookups, SQL, compaction), and every
refusal: a broken order, a raising class, a wrong type, a changed key."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.api.local import LocalLake as Lake
from limno.data import user_iterators
from limno.data.iterators import IteratorSpec, apply, parse_iterators
from limno.data.keys import PoolKey
from limno.data.kway import concat_unified, reverse_table
from limno.data.user_iterators import MAX_FILE_BYTES, UserIterator
from limno.engines.local import query
from limno.errors import CorruptError, InvalidInputError, NotFoundError

#: Python twins of the built-in ``dedup`` and ``sum(F)``, as a user would write them
TWINS = '''
import pyarrow as pa


def _numbered(batch):
    table = pa.Table.from_batches([batch])
    return table.append_column("__i", pa.array(range(batch.num_rows), pa.int64()))


class Newest:
    """dedup: the newest row of each key group."""

    def __init__(self, key_fields, options):
        self.keys = key_fields

    def apply(self, batches):
        for batch in batches:
            groups = _numbered(batch).group_by(self.keys, use_threads=False)
            newest = groups.aggregate([("__i", "max")]).column("__i_max")
            yield batch.take(newest.combine_chunks())


class Summed:
    """sum(F): F summed over the group, every other field from the newest row."""

    def __init__(self, key_fields, options):
        self.keys, self.field = key_fields, options["field"]

    def apply(self, batches):
        for batch in batches:
            groups = _numbered(batch).group_by(self.keys, use_threads=False)
            agg = groups.aggregate([("__i", "max"), (self.field, "sum")])
            newest = pa.Table.from_batches([batch]).take(agg.column("__i_max"))
            i = newest.schema.get_field_index(self.field)
            yield newest.set_column(i, self.field, agg.column(self.field + "_sum"))
'''

#: iterators that break the protocol, one way each
BROKEN = """
import os
import pyarrow as pa


class Backwards:
    def __init__(self, key_fields, options):
        pass

    def apply(self, batches):
        for batch in batches:
            yield batch.take(pa.array(range(batch.num_rows - 1, -1, -1)))


class Raising:
    def __init__(self, key_fields, options):
        pass

    def apply(self, batches):
        for batch in batches:
            raise ValueError(f"cannot take {batch.num_rows} rows")
            yield batch


class Numbers:
    def __init__(self, key_fields, options):
        pass

    def apply(self, batches):
        for batch in batches:
            yield batch.num_rows


class Exiting:
    def __init__(self, key_fields, options):
        pass

    def apply(self, batches):
        for batch in batches:
            raise SystemExit(5)
            yield batch


class Nothing:
    def __init__(self, key_fields, options):
        pass

    def apply(self, batches):
        return 42


class Shifted:
    def __init__(self, key_fields, options):
        self.key = key_fields[0]

    def apply(self, batches):
        for batch in batches:
            i = batch.schema.get_field_index(self.key)
            shifted = pa.compute.add(batch.column(i), 1000)
            yield batch.set_column(i, self.key, shifted)


class Nulled:
    def __init__(self, key_fields, options):
        self.key = key_fields[0]

    def apply(self, batches):
        for batch in batches:
            i = batch.schema.get_field_index(self.key)
            yield batch.set_column(i, self.key, pa.nulls(batch.num_rows, pa.int64()))


class FirstOnly:
    def __init__(self, key_fields, options):
        pass

    def apply(self, batches):
        yield next(iter(batches))


class Picky:
    def __init__(self, key_fields, options):
        if "n" not in options:
            raise KeyError("option n is required")

    def apply(self, batches):
        return batches


NotAClass = 3
"""

KEY = PoolKey.parse("k")


def user(target: str, source: str = TWINS, **options: str) -> IteratorSpec:
    opts = "".join(f",{k}={v}" for k, v in options.items())
    return parse_iterators([f"python({target}{opts})"], file_text=source, file_name="it.py")


def stream(spec: IteratorSpec, tables: Sequence[pa.Table], reverse: bool = False) -> list[Any]:
    out = list(apply(tables, KEY, spec, reverse=reverse))
    assert all(t.num_rows for t in out)
    return concat_unified(out).to_pylist() if out else []


def sorted_rows(rows: list[tuple[int, int]]) -> pa.Table:
    """Rows sorted by key, ties in write order (the order a scan streams them)."""
    ordered = sorted(enumerate(rows), key=lambda r: (r[1][0], r[0]))
    return pa.table(
        {
            "k": pa.array([k for _, (k, _) in ordered], pa.int64()),
            "n": pa.array([n for _, (_, n) in ordered], pa.int64()),
            "w": pa.array([i for i, _ in ordered], pa.int64()),
        }
    )


def cut(table: pa.Table, cuts: Sequence[int]) -> list[pa.Table]:
    bounds = [0, *sorted(c % (table.num_rows + 1) for c in cuts), table.num_rows]
    return [table.slice(a, b - a) for a, b in zip(bounds, bounds[1:], strict=False)]


# -- parsing and storing -------------------------------------------------------------------
def test_parse_round_trip_and_describe() -> None:
    spec = parse_iterators(["age-off(ts,30d)", "python( mypkg.mod:TopN , n = 3,by=x.y )"])
    assert spec.user == UserIterator("mypkg.mod:TopN", (("n", "3"), ("by", "x.y")))
    assert spec.texts() == ["age-off(ts,30d)", "python(mypkg.mod:TopN,n=3,by=x.y)"]
    assert spec.needs_order and IteratorSpec.from_json(spec.to_json()) == spec
    assert parse_iterators(spec.texts()) == spec
    stored = user("Newest")
    assert stored.user is not None and stored.user.file == "it.py"
    digest = hashlib.sha256(TWINS.encode()).hexdigest()  # content-addressed
    assert stored.user.source == TWINS and stored.user.sha256 == digest
    assert stored.describe() == f"python(Newest) from it.py (sha256 {digest[:12]})"
    assert IteratorSpec.from_json(stored.to_json()) == stored
    assert "source" not in repr(stored.user) and bool(parse_iterators(["python(m:C)"]))
    named = parse_iterators(["python(C)"], file_text="", file_name="/some/dir/mine.py")
    assert named.user is not None and named.user.file == "mine.py"


@pytest.mark.parametrize(
    ("texts", "file_text", "message"),
    [
        (["python(mod:Cls)", "python(other:Cls)"], None, "a pool has one python iterator"),
        (["python(a b)"], None, "expected python(module:Class"),
        (["python(m:C,n)"], None, "expected option=value, not 'n'"),
        (["python(m:C,n=1,n=2)"], None, "option 'n' is given twice"),
        (["python(Cls)"], None, "no file was given"),
        (["python(m:Cls)"], "x = 1", "names an importable class"),
        (["dedup"], "x = 1", "an iterator file needs an iterator python(CLASS"),
        ([], "x = 1", "an iterator file needs an iterator python(CLASS"),
        (["python(C)"], "#" * (MAX_FILE_BYTES + 1), "over the limit"),
        (["pyth(C)"], None, "or python(CLASS)"),
    ],
)
def test_parse_errors(texts: list[str], file_text: str | None, message: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        parse_iterators(texts, file_text=file_text)


def test_a_changed_file_is_refused_by_its_digest() -> None:
    spec = user("Newest")
    assert spec.user is not None
    forged = dataclasses.replace(spec.user, source=TWINS + "\nimport os\n")
    with pytest.raises(CorruptError, match="does not match its SHA-256"):
        user_iterators.check(forged, KEY)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (lambda: user("Nope"), "iterator Nope (it.py): file it.py has no class 'Nope'"),
        (lambda: user("NotAClass", BROKEN), "NotAClass is not a class with an apply"),
        (lambda: user("C", "def broken(:\n"), "cannot load its file: SyntaxError"),
        (lambda: user("C", "import sys\nsys.exit(3)\n"), "cannot load its file: SystemExit: 3"),
        (lambda: user("Picky", BROKEN), "iterator Picky (it.py) failed: KeyError"),
        (lambda: parse_iterators("python(no_such_mod_xyz:C)"), "cannot import no_such_mod_xyz"),
    ],
)
def test_a_class_that_cannot_be_made_is_refused(spec: Any, message: str) -> None:
    found = spec().user
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        user_iterators.check(found, KEY)


def test_importable_class(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_twins_mod.py").write_text(TWINS)
    monkeypatch.syspath_prepend(str(tmp_path))
    table = sorted_rows([(1, 5), (2, 6), (1, 7)])
    spec = parse_iterators("python(my_twins_mod:Summed,field=n)")
    assert stream(spec, [table]) == stream(parse_iterators("sum(n)"), [table])


# -- the same answers as the built-in iterators ------------------------------------------------
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(st.tuples(st.integers(0, 12), st.integers(-9, 9)), max_size=40),
    cuts=st.lists(st.integers(0, 40), max_size=5),
    built_in=st.sampled_from(["dedup", "sum(n)", "dedup,age-off(w,1d)"]),
)
def test_a_twin_streams_as_the_built_in(
    rows: list[tuple[int, int]], cuts: list[int], built_in: str
) -> None:
    table = sorted_rows(rows)
    plain = parse_iterators(built_in)
    twin = user("Summed", field="n") if "sum" in built_in else user("Newest")
    twin = dataclasses.replace(twin, age_offs=plain.age_offs)  # built-in age-off, then the twin
    expected = stream(plain, cut(table, cuts))
    assert stream(twin, cut(table, cuts)) == expected
    backwards = cut(reverse_table(table), cuts)
    assert stream(twin, backwards, reverse=True) == expected[::-1]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    loads=st.lists(
        st.lists(st.tuples(st.integers(0, 30), st.integers(-5, 5)), min_size=1, max_size=25),
        min_size=2,
        max_size=4,
    ),
    built_in=st.sampled_from(["dedup", "sum(n)"]),
    split_at=st.integers(1, 29),
)
def test_a_twin_pool_answers_as_the_built_in_at_query_time_and_after_compaction(
    tmp_path_factory: pytest.TempPathFactory,
    loads: list[list[tuple[int, int]]],
    built_in: str,
    split_at: int,
) -> None:
    lake = Lake.init(str(tmp_path_factory.mktemp("lake")))
    plain = lake.create_pool("plain", key="k", iterators=[built_in])
    twin = lake.create_pool("twin", key="k")
    text = "python(Summed,field=n)" if built_in == "sum(n)" else "python(Newest)"
    twin.set_iterators([text], TWINS, "twins.py")
    for load in loads:
        data = pa.table({"k": [k for k, _ in load], "n": [n for _, n in load]})
        plain.load([data])
        twin.load([data])

    def answers(name: str) -> list[Any]:
        pool = lake.pool(name)
        first = min(k for load in loads for k, _ in load)
        return [
            pool.scan().to_pylist(),
            pool.scan(order="desc").to_pylist()[::-1],
            pool.scan(start=split_at).to_pylist(),
            pool.get([first]).to_pylist(),
            query(lake, f"SELECT k, n FROM {name} ORDER BY k").to_pylist(),
        ]

    expected = answers("plain")
    assert answers("twin") == expected
    for pool in (plain, twin):
        pool.split("root", at=split_at)
        pool.compact([o.id for o in pool.snapshot()[0]])
    assert answers("plain") == answers("twin") == expected
    # compaction really ran the twin: one stored row per key, as the built-in stores
    stored = [sum(o.rows for o in lake.pool(n).snapshot()[0]) for n in ("plain", "twin")]
    assert stored[0] == stored[1] == len(expected[0])
    assert list(lake.verify()) == []


def test_keyless_rows_pass_by_and_built_ins_run_first() -> None:
    key = PoolKey.parse("a,b")
    table = pa.table(
        {
            "a": [1, 1, 2, 2, None, 3],
            "b": [1, 1, 5, 5, 1, None],
            "n": [1, 2, -3, 4, 5, 6],
        }
    )
    keyed, keyless = table.slice(0, 4), table.slice(4)
    spec = parse_iterators(["sum(n)", "python(Newest)"], file_text=TWINS)
    out = list(apply([keyed.slice(0, 3), keyed.slice(3), keyless], key, spec))
    assert concat_unified(out).to_pylist() == [
        {"a": 1, "b": 1, "n": 3},
        {"a": 2, "b": 5, "n": 1},
        {"a": None, "b": 1, "n": 5},
        {"a": 3, "b": None, "n": 6},
    ]
    back = list(apply([reverse_table(keyless), reverse_table(keyed)], key, spec, reverse=True))
    assert concat_unified(back).to_pylist() == concat_unified(out).to_pylist()[::-1]


RECORDER = """
SEEN = []


class Recorder:
    def __init__(self, key_fields, options):
        pass

    def apply(self, batches):
        for batch in batches:
            SEEN.append(batch)
            yield batch
"""


def test_every_key_group_comes_whole_in_one_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "recorder_mod.py").write_text(RECORDER)
    monkeypatch.syspath_prepend(str(tmp_path))
    import recorder_mod  # type: ignore[import-not-found]

    table = sorted_rows([(k // 3, k) for k in range(12)])
    spec = parse_iterators("python(recorder_mod:Recorder)")
    assert stream(spec, cut(table, [1, 4, 5, 7, 11])) == table.to_pylist()
    seen = [b.column("k").to_pylist() for b in recorder_mod.SEEN]
    assert all(isinstance(b, pa.RecordBatch) for b in recorder_mod.SEEN)
    assert [k for batch in seen for k in batch] == table.column("k").to_pylist()
    for batch, after in zip(seen, seen[1:], strict=False):
        assert batch[-1] != after[0]  # no key group is cut between two batches


# -- refusals --------------------------------------------------------------------------------
TABLE = sorted_rows([(k, k) for k in range(6)])


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "Backwards",
            "iterator Backwards (it.py) broke the pool key order: it yielded key 3 after 4",
        ),
        ("Raising", "iterator Raising (it.py) failed: ValueError: cannot take 5 rows"),
        ("Exiting", "iterator Exiting (it.py) failed: SystemExit: 5"),  # not the process's end
        ("Numbers", "iterator Numbers (it.py) yielded int, not a pyarrow RecordBatch or Table"),
        ("Nothing", "iterator Nothing (it.py): apply returned int, not an iterator"),
        ("Shifted", "iterator Shifted (it.py) yielded key 1000, which it was not given"),
        ("Nulled", "iterator Nulled (it.py) yielded rows without the pool key (k)"),
        ("FirstOnly", "iterator FirstOnly (it.py) stopped before reading all of its input"),
    ],
)
def test_a_broken_iterator_is_refused(target: str, message: str) -> None:
    spec = user(target, BROKEN)
    with pytest.raises(InvalidInputError) as caught:
        stream(spec, [TABLE, sorted_rows([(9, 9)])])
    assert str(caught.value).startswith(message), caught.value
    if target == "Raising":
        assert isinstance(caught.value.__cause__, ValueError)


def test_the_first_out_of_order_key_is_named_across_batches() -> None:
    source = """
import pyarrow as pa

class Late:
    def __init__(self, key_fields, options):
        pass

    def apply(self, batches):
        held = list(batches)
        yield held[-1]
        yield from held[:-1]
"""
    with pytest.raises(
        InvalidInputError, match="broke the pool key order: it yielded key 0 after 9"
    ):
        stream(user("Late", source), [TABLE, sorted_rows([(9, 9)])])


def test_an_error_of_the_stream_passes_through_unchanged() -> None:
    def failing() -> Iterator[pa.Table]:
        yield TABLE
        raise NotFoundError("object 123 was removed by vacuum")

    with pytest.raises(NotFoundError, match="removed by vacuum"):
        stream(user("Newest"), failing())  # type: ignore[arg-type]


def test_set_iterators_on_an_older_handle_changes_the_latest_config(tmp_path: Path) -> None:
    """A handle opened before another change of the pool's configuration (the batcher's
    settings, say) still sets its iterators, keeping that change."""
    lake = Lake.init(str(tmp_path / "lake"))
    older = lake.create_pool("p", key="k")
    Lake.open(str(tmp_path / "lake")).pool("p").ingest_settings("max-files=7")
    older.set_iterators(["python(Newest)"], TWINS, "twins.py")
    fresh = Lake.open(str(tmp_path / "lake")).pool("p")
    assert fresh.config.settings.iterators.texts() == ["python(Newest)"]
    assert fresh.ingest_settings().max_files == 7
