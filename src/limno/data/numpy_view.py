"""A fixed-width Arrow array as numpy's view of its own buffer.

``to_numpy`` imports pandas on first use (half a second of a new process: a CLI
``get``, a UI page's first read), so the data layer reads the values buffer itself;
and ``pa.array`` of a numpy array does too, so indices go back the same way.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["fixed_values", "from_values"]


def fixed_values(array: pa.Array, kind: type[np.generic] | np.dtype) -> np.ndarray:
    """The values of ``array`` (fixed width, its nulls' slots unspecified) as ``kind``,
    zero copy, honouring the array's offset."""
    values = np.frombuffer(array.buffers()[1], kind)
    return values[array.offset : array.offset + len(array)]


def from_values(values: np.ndarray) -> pa.Array:
    """A 1-d numpy array of numbers (no nulls) as an Arrow array sharing its memory."""
    values = np.ascontiguousarray(values)
    kind = pa.from_numpy_dtype(values.dtype)
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])
