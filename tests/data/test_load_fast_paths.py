"""The load path's shortcuts must agree with the general code they skip.

* Distinct integer keys dense in their range are ordered by placing each row in its
  key's slot (``sort._dense_order``), not sorted: the order must equal Arrow's stable
  sort whatever the keys (repeats, gaps, nulls, descending), falling back when a key
  repeats.
* Parquet input text whose bytes are all ASCII skips Arrow's UTF-8 validation
  (``input_checks._ascii_text``): ``check_values`` must refuse exactly what full
  validation refuses.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.data.input_checks import check_values
from limno.data.keys import PoolKey
from limno.data.sort import sort_order
from limno.errors import InvalidInputError

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def integer_keys(draw: st.DrawFn) -> tuple[list[int | None], str]:
    """Keys of every shape the dense path meets: a permutation of a range (dense and
    distinct), with gaps, with repeats, with nulls, far from zero, or spread wide."""
    n = draw(st.integers(2, 300))
    base = draw(st.sampled_from([0, -(2**40), 2**62 - 1000, 17]))
    shape = draw(st.sampled_from(["permutation", "gaps", "repeats", "wide"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if shape == "permutation":
        values = rng.permutation(n)
    elif shape == "gaps":
        values = rng.choice(2 * n, n, replace=False)
    elif shape == "repeats":
        values = rng.integers(0, max(1, n // 2), n)
    else:
        values = rng.integers(0, 2**40, n)
    if shape != "wide" and draw(st.booleans()):
        values = np.sort(values)[::-1].copy()  # descending input
    keys: list[int | None] = [int(v) + base for v in values]
    for i in draw(st.lists(st.integers(0, n - 1), max_size=5)):
        keys[i] = None
    return keys, draw(st.sampled_from(["k", "k:desc"]))


@SETTINGS
@given(integer_keys(), st.booleans())
def test_sort_order_equals_a_stable_sort(case: tuple[list[int | None], str], runs: bool) -> None:
    keys, key_text = case
    key = PoolKey.parse(key_text)
    table = pa.table({"k": pa.array(keys, pa.int64()), "row": pa.array(range(len(keys)))})
    order = sort_order(table, key, runs=runs)  # runs: a merge's round (its own sort)
    got = list(range(len(keys))) if order is None else [int(i) for i in order]
    assert got == key.sort_indices(table).to_pylist()


def test_dense_keys_are_placed_and_repeats_fall_back() -> None:
    key = PoolKey.parse("k")
    rng = np.random.default_rng(5)
    dense = rng.permutation(1_000_000) + 10
    order = sort_order(pa.table({"k": dense}), key)
    assert order is not None and order.dtype == np.int32  # the placing path's indices
    assert bool((dense[order] == np.arange(10, 1_000_010)).all())
    repeated = dense.copy()
    repeated[-1] = repeated[0]  # one repeat, found only after every row was placed
    order = sort_order(pa.table({"k": repeated}), key)
    assert order is not None and order.dtype == np.int64  # the sort's
    assert bool((np.diff(repeated[order]) >= 0).all())
    assert int(order[int(np.searchsorted(repeated[order], repeated[0]))]) == 0  # stable


TEXT = st.lists(
    st.one_of(
        st.none(),
        st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=8),
        st.text(max_size=4),
        st.binary(max_size=4),  # arbitrary bytes: often not UTF-8
    ),
    min_size=1,
    max_size=20,
)


@SETTINGS
@given(TEXT, st.booleans(), st.integers(0, 3))
def test_check_values_refuses_what_full_validation_refuses(
    values: list[str | bytes | None], large: bool, cut: int
) -> None:
    raw = [v.encode() if isinstance(v, str) else v for v in values]
    binary = pa.array(raw, pa.large_binary() if large else pa.binary())
    text = binary.view(pa.large_string() if large else pa.string()).slice(min(cut, len(raw) - 1))
    try:
        text.validate(full=True)
        valid = True
    except pa.ArrowInvalid:
        valid = False
    if valid:
        check_values("t", pa.table({"s": text}), 0)
    else:
        with pytest.raises(InvalidInputError, match="invalid UTF-8"):
            check_values("t", pa.table({"s": text}), 0)
