"""Framework-free value types and units shared by estimate, run and report."""
