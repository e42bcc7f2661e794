"""Storage: the only package that speaks SQL.

``db`` opens and checks the file, ``migrate`` applies the numbered schema,
``frontier`` owns the frontier, visited set and quiescence, ``results`` answers
the report's questions, and ``async_store`` runs all of it on one writer thread.
"""
