"""Engines: where pool data is processed (local: Arrow + DuckDB; spark: PySpark)."""
