"""The routes of the HTTP API: one module per group of operations, one path each."""
