"""Storage: the only package that speaks SQL.

``contract`` states what every backend keeps (the ``FrontierStore`` Protocol);
``open`` picks a backend from ``--db`` and opens a crawl or its report;
``sqlite/`` and ``postgres/`` are the two backends; ``migrate`` finds the
numbered schema files; ``liveness`` tells dead workers from live ones.
"""
