"""``limno etl`` (SPEC section 5, zync): Debezium-aware rules from raw pools to a staging pool.

An interface layer beside :mod:`limno.streams`: it reaches a lake only through the
one lake interface (:mod:`limno.api`), so a run works the same on a lake path and on
a ``limno serve`` URL. :mod:`.config` reads and checks the YAML config,
:mod:`.state` keeps what each run consumed and what waits for a join partner (in
the commit meta of the output pool, so output and completion land in one commit),
:mod:`.local` evaluates the rules with DuckDB and :mod:`.run` ties a run together.

Nothing here is imported at CLI start: DuckDB and pyarrow load when ``etl`` runs.
"""
