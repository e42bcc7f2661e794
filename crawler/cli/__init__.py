"""The command line: ``crawler crawl``, ``resume``, ``work``, ``report``, ``serve``."""
