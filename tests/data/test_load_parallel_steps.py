"""The load's steps that run in threads must decide exactly what one thread decides.

* ``check_arrow`` validates a large Arrow batch in slices of rows, one thread each: it
  must refuse exactly the batches that Arrow's full validation of the whole batch
  refuses (bad UTF-8 in any slice, a null count that a column declares wrongly) and
  accept all others.
* ``sort._dense_order`` places the rows of a large set of dense keys by several
  threads: the order must still equal Arrow's stable sort, and a key repeated
  anywhere (found by whichever thread) must fall back to the sort.
* The key sketch filters NaN out of float keys only (integers cannot hold one).

The thresholds are lowered so that small examples take the threaded paths.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.data import input_checks, sort
from limno.data.input_checks import check_arrow
from limno.data.keys import PoolKey
from limno.data.sketches import SketchBuilder
from limno.errors import InvalidInputError

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VALUES = st.lists(
    st.one_of(st.none(), st.text(max_size=3), st.binary(max_size=3)), min_size=4, max_size=40
)


def _wrong_nulls(values: pa.Array, declared: int) -> pa.Array:
    """``values`` (int64) claiming ``declared`` nulls whatever its validity bitmap says."""
    validity, data = values.buffers()
    return pa.Array.from_buffers(pa.int64(), len(values), [validity, data], null_count=declared)


@SETTINGS
@given(VALUES, st.integers(0, 3), st.sampled_from([None, 0, 1, 7]))
def test_sliced_check_refuses_what_whole_validation_refuses(
    raw: list[str | bytes | None], cut: int, declared: int | None
) -> None:
    as_bytes = [v.encode() if isinstance(v, str) else v for v in raw]
    text = pa.array(as_bytes, pa.binary()).view(pa.string()).slice(cut)
    n = len(text)
    numbers = pa.array([None if i % 3 == 0 else i for i in range(n)], pa.int64())
    if declared is not None:
        numbers = _wrong_nulls(numbers, min(declared, n))  # more than n: refused at once
    batch = pa.RecordBatch.from_arrays([text, numbers], ["s", "i"])
    try:
        batch.validate(full=True)
        valid = True
    except pa.ArrowInvalid:
        valid = False
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(input_checks, "PARALLEL_CHECK_ROWS", 2)  # slices of 2 rows and up
        if valid:
            check_arrow("t", batch, 0)
        else:
            with pytest.raises(InvalidInputError, match="^t: "):
                check_arrow("t", batch, 0)


def test_a_bad_value_in_a_later_slice_is_named() -> None:
    values = ["a"] * 30
    raw: list[bytes] = [v.encode() for v in values]
    raw[25] = b"\xff"
    batch = pa.RecordBatch.from_arrays([pa.array(raw, pa.binary()).view(pa.string())], ["s"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(input_checks, "PARALLEL_CHECK_ROWS", 4)
        with pytest.raises(InvalidInputError, match="row 26: invalid UTF-8 in field 's'"):
            check_arrow("t", batch, 0)


@st.composite
def dense_keys(draw: st.DrawFn) -> tuple[np.ndarray, bool]:
    """A shuffled range, maybe with a gap, maybe one key repeated (at any row)."""
    n = draw(st.integers(20, 400))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    keys = rng.permutation(n + draw(st.sampled_from([0, 0, n // 3])))[:n]
    keys += draw(st.sampled_from([0, -(2**40), 5]))
    if draw(st.booleans()):
        keys[draw(st.integers(1, n - 1))] = keys[draw(st.integers(0, n - 1))]
    return keys, draw(st.booleans())


@SETTINGS
@given(dense_keys())
def test_threaded_placing_equals_a_stable_sort(case: tuple[np.ndarray, bool]) -> None:
    keys, descending = case
    key = PoolKey.parse("k:desc" if descending else "k")
    table = pa.table({"k": keys, "row": np.arange(len(keys))})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sort, "ARANGE_ROWS", 8)  # the first 8 rows alone, then the threads
        mp.setattr(sort, "PARALLEL_SORT_MIN_ROWS", 8)
        order = sort.sort_order(table, key)
    got = list(range(len(keys))) if order is None else [int(i) for i in order]
    assert got == key.sort_indices(table).to_pylist()


def test_a_key_sketch_counts_numbers_and_skips_nan_only_in_floats() -> None:
    builder = SketchBuilder()
    builder.add(pa.array([3, None, 1, 2], pa.int64()))
    ints, _ = builder.finish()
    assert ints.n == 3 and ints.quantile(0.0) == 1.0
    builder = SketchBuilder()
    builder.add(pa.array([0.5, float("nan"), None, 2.5]))
    floats, _ = builder.finish()
    assert floats.n == 2 and floats.quantile(1.0) == 2.5
