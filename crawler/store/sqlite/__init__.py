"""The SQLite backend: one writer thread, migrations, frontier, results."""
