"""The rules every backend follows, as pure functions: no I/O, and no import of any other part of
``memstack.backends`` (each backend package imports these; none of these imports a backend).

    json_values.py   a value as durable stores keep it: a JSON copy, JSON text
    time.py          instants as UTC microseconds (the SQL time filters) and back
    history.py       the history read's filters and order, for the backends that read in Python
    checkpoints.py   how many checkpoints a thread keeps, and what a new one is
    records.py       what a record change does (``step``), input checks, the per-user match
    units.py         BM25: the formula every unit store computes, input checks
    vectors.py       the vector index contract: input checks, the held model, scores and order
    matrix.py        one user's vectors as an in-process float32 matrix (exact search)
    indexes.py       the indexes outside the store (Milvus, Chroma): generations behind a name, and
                     the contract's steps around each call (the calls are the backend's hooks)
    index_rows.py    their rows, and which terms a search, fetch or delete filters on
    index_urls.py    their URLs' shared query options (timeout, secure)
    deletions.py     the notes a deletion leaves: keyed hashes, counts by what they were
"""
