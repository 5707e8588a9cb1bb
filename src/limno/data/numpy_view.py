"""A fixed-width Arrow array as numpy's view of its own buffer.

``to_numpy`` imports pandas on first use (half a second of a new process: a CLI
``get``, a UI page's first read), so the data layer reads the values buffer itself.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["fixed_values"]


def fixed_values(array: pa.Array, kind: type[np.generic] | np.dtype) -> np.ndarray:
    """The values of ``array`` (fixed width, its nulls' slots unspecified) as ``kind``,
    zero copy, honouring the array's offset."""
    values = np.frombuffer(array.buffers()[1], kind)
    return values[array.offset : array.offset + len(array)]
