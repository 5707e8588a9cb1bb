"""The data layer: records, keys, schemas, formats, sorting, merging, Parquet objects.

It knows nothing of commits, branches or pools (it imports no other limno package but
storage and the base modules), like the Zed lake's ``lake/data``.
"""
