"""Deterministic generated data: the same seed gives the same rows on every machine.

Every benchmark table has four columns: ``k`` (int64 key, a permutation of
``start .. start + rows - 1`` unless sorted), ``a`` (int64), ``b`` (float64) and
``s`` (a string of 5 to 14 characters).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEED = 20261123


def rows_table(rows: int, *, seed: int = SEED, start: int = 0, shuffled: bool = True) -> pa.Table:
    """``rows`` rows with keys ``start .. start + rows - 1`` (shuffled unless told)."""
    rng = np.random.default_rng([seed, start, rows])
    k = np.arange(start, start + rows, dtype=np.int64)
    if shuffled:
        rng.shuffle(k)
    a = rng.integers(0, 2**40, rows, dtype=np.int64)
    b = rng.random(rows)
    digits = pc.cast(pa.array(rng.integers(0, 10**9, rows, dtype=np.int64)), pa.string())
    s = pc.binary_join_element_wise("val-", digits, "")
    return pa.table({"k": k, "a": a, "b": b, "s": s})


def parts(table: pa.Table, n: int) -> list[pa.Table]:
    """``table`` cut into ``n`` consecutive slices of (nearly) equal length."""
    rows = table.num_rows
    bounds = [rows * i // n for i in range(n + 1)]
    return [table.slice(bounds[i], bounds[i + 1] - bounds[i]) for i in range(n)]


def sample_keys(rows: int, count: int, seed: int = SEED) -> list[int]:
    """``count`` keys drawn uniformly from ``0 .. rows - 1``."""
    rng = np.random.default_rng([seed, 7, rows])
    return [int(x) for x in rng.integers(0, rows, count)]
