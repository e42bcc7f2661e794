"""The command line's exit codes, lychee's: CI pipelines read them unchanged.

0 every link fine, 2 broken links found, 3 bad usage or configuration, 1 any
other failure (a seed that could not be reached, too); an interrupted crawl
130 (SIGINT) or 143 (SIGTERM). A module of its own so that ``crawler
--version`` imports it and nothing else of the CLI.
"""

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BROKEN = 2
EXIT_USAGE = 3
EXIT_SIGINT = 130
EXIT_SIGTERM = 143
