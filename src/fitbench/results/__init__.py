"""Results: what fitbench keeps and shows after a job — the SQLite run history (history.py),
terminal tables and reports.

Nothing is re-exported here on purpose: a reporter that only formats a result should not pay for
opening a database, so each module is imported where it is used
(``from fitbench.results.history import History``).
"""
