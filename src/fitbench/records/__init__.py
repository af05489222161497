"""Typed records that cross the floors: a measurement (what a child process measured) and a run
record (what the history stores), each with to_dict/from_dict and a schema version, and the
typed sections they carry (sections.py: the distributed layout, the max-batch search, the diagnosis).

They are plain data with no dependency above `fitbench.errors`, so the measuring code, the
advice, the results and the CLI all read the same attributes instead of dict keys.
"""
