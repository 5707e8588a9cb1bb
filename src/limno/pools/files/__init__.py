"""File pools: paths mapped to immutable stored objects, under branches and commits.

A file pool keeps, per path, an entry (size, ETag, content type, user metadata,
mtime) pointing at a blob limno wrote (``<pool-id>/data/<id>``) or at an imported
object it did not write. Entries are versioned by the same core as record pools.
"""
