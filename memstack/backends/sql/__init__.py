"""What the SQLite and PostgreSQL backends share: no driver, only SQL text and its parameters.

    dialect.py        Dialect: the placeholder, lists as parameters, table names, time values
    where.py          the WHERE builders both backends use, one copy each, written for a Dialect
    adapter_rows.py   the LangGraph adapters' rows a user's deletion reaches, run on a caller's runner
    history.py        the history read's SELECT both write alike
    records.py        the record store's and usage log's statements both write alike (codecs from the Dialect)
    deletions.py      the deletion notes' INSERT and reads both write alike
    units.py          the unit store's reads both write alike (users, rounds, get's order, iterate's pages)
    transaction.py    SQLite's write transaction (the SQLite backend's, and the memory backend's side database)

What is one dialect's own stays in its package: SKIP LOCKED and advisory locks, triggers, the
postings' DDL, jsonb and collation in PostgreSQL; WAL, BEGIN IMMEDIATE and chunked IN lists in
SQLite.
"""
