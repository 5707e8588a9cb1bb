"""Which engine runs a piece of work: ``--engine local|spark|auto``.

``auto`` runs on Spark from ``LIMNO_SPARK_THRESHOLD`` bytes of work on (default
1 GiB, in :mod:`limno.units`' notation), when PySpark is installed; below that,
in this process. Deciding never imports PySpark.
"""

from __future__ import annotations

import importlib.util
import os

from limno.errors import InvalidInputError
from limno.units import parse_size

__all__ = ["AUTO_THRESHOLD", "ENGINES", "spark_available", "use_spark"]

ENGINES = ("local", "spark", "auto")
#: ``--engine auto`` runs on Spark from this much input (``LIMNO_SPARK_THRESHOLD``)
AUTO_THRESHOLD = 2**30


def spark_available() -> bool:
    """Whether PySpark is installed (without importing it)."""
    return importlib.util.find_spec("pyspark") is not None


def use_spark(engine: str, size: int) -> bool:
    """Whether ``engine`` runs on Spark for ``size`` bytes of work."""
    if engine not in ENGINES:
        raise InvalidInputError(f"unknown engine {engine!r} (local, spark or auto)")
    if engine != "auto":
        return engine == "spark"
    env = os.environ.get("LIMNO_SPARK_THRESHOLD")
    threshold = parse_size(env) if env else AUTO_THRESHOLD
    return size >= threshold and spark_available()
