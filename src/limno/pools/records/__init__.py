"""Record pools: rows sorted by a pool key in an LSM layout of Parquet objects."""
