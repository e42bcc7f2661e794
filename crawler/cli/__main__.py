"""``python -m crawler.cli``: the same as the ``crawler`` command."""

from crawler.cli.main import run

run()
