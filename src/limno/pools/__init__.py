"""Pools: named, versioned collections in a lake (records and files)."""
