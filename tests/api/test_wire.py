"""The JSON forms of :mod:`limno.api.wire` give back what was sent, through JSON text."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from limno import CompactionJob, DiffEntry, Fault, HookSpec, JobResult, MergeResult, VacuumReport
from limno.api import wire
from limno.data.nanos import NanoDatetime, NanoTime, NanoTimedelta
from limno.data.objects import DataObject
from limno.errors import InvalidInputError


def through_json(v: Any) -> Any:
    return json.loads(json.dumps(v))


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
    st.decimals(allow_nan=False, allow_infinity=False, places=4),
    st.datetimes(),
    st.datetimes(timezones=st.just(dt.UTC)),
    st.dates(),
    st.times(),
    st.timedeltas(),
    st.builds(NanoDatetime, st.datetimes(), st.integers(1, 999)),
    st.builds(NanoTime, st.times(), st.integers(1, 999)),
    st.builds(NanoTimedelta, st.timedeltas(), st.integers(1, 999)),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=5), inner, max_size=4),
    ),
    max_leaves=12,
)


@given(values)
def test_values_come_back_with_their_type(v: Any) -> None:
    back = wire.value_from_json(through_json(wire.value_to_json(v)))
    assert back == v
    assert type(back) is type(v)


@pytest.mark.parametrize("v", [math.inf, -math.inf])
def test_infinities_come_back(v: float) -> None:
    assert wire.value_from_json(through_json(wire.value_to_json(v))) == v


def test_nan_comes_back() -> None:
    assert math.isnan(wire.value_from_json(through_json(wire.value_to_json(math.nan))))


@pytest.mark.parametrize("bad", [{"a": 1, "b": 2}, {"nope": 1}, {"decimal": "x"}])
def test_forms_never_written_are_invalid_input(bad: Any) -> None:
    with pytest.raises(InvalidInputError):
        wire.value_from_json(bad)


@given(st.one_of(st.none(), st.timedeltas(min_value=dt.timedelta(0))))
def test_a_retention_window_comes_back(window: dt.timedelta | None) -> None:
    assert wire.retention_from_json(through_json(wire.retention_to_json(window))) == window


@given(st.dictionaries(st.text(min_size=1), st.timedeltas(min_value=dt.timedelta(0))))
def test_retention_by_branch_comes_back(windows: dict[str, dt.timedelta]) -> None:
    assert wire.retention_from_json(through_json(wire.retention_to_json(windows))) == windows


@given(st.one_of(st.none(), st.datetimes(timezones=st.just(dt.UTC)), st.datetimes()))
def test_times_come_back(t: dt.datetime | None) -> None:
    assert wire.time_from_json(through_json(wire.time_to_json(t))) == t


def test_bad_times_are_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match="invalid time"):
        wire.time_from_json("yesterday")


def test_model_types_come_back() -> None:
    schema = pa.schema([("ts", pa.timestamp("ns"))])
    import base64

    obj = DataObject(
        id="2aBc",
        rows=3,
        size=100,
        min_key=(NanoDatetime(dt.datetime(2024, 1, 1), 5),),
        max_key=(dt.datetime(2024, 1, 2),),
        keyless=1,
        schema_b64=base64.b64encode(schema.serialize().to_pybytes()).decode(),
        key_types=("timestamp[ns]",),
        created="2024-01-01T00:00:00+00:00",
        extra={"order": ["a", "b"]},
        replaces=("x",),
        partitions=("root",),
        clip=((decimal.Decimal("1.5"),), None),
    )
    back = wire.object_from_json(through_json(wire.object_to_json(obj)))
    assert back == obj and back.clip == obj.clip
    merge = MergeResult("merge", "c1", None, ("k1", "k2"))
    assert wire.merge_from_json(through_json(wire.merge_to_json(merge))) == merge
    entry = DiffEntry("changed", "k", {"rows": 1}, {"rows": 2})
    assert wire.diff_from_json(through_json(wire.diff_to_json(entry))) == entry
    job = JobResult(CompactionJob("j", "root", ("a", "b")), 10, 8, ("c",), 0.25)
    assert wire.job_from_json(through_json(wire.job_to_json(job))) == job
    report = VacuumReport([("data/a.parquet", 10)], too_young=1, referenced=2, leased=3)
    assert wire.vacuum_from_json(through_json(wire.vacuum_to_json(report))) == report
    fault = Fault("pools/x", "broken", "run vacuum")
    assert wire.fault_from_json(through_json(wire.fault_to_json(fault))) == fault
    hook = HookSpec("h", "pre-commit", run="true", branches=("main",))
    assert wire.hook_from_json(through_json(wire.hook_to_json(hook))) == hook
    assert wire.schema_from_json(None) is None and wire.schema_to_json(None) is None
