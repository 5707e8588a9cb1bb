"""The versioning core: commits, refs, content-addressed snapshots, the commit protocol,
three-way merge, hooks, and the protocol between vacuum and writers. It versions a sorted
map of entries and knows nothing of what the entries are."""
