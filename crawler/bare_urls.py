"""URLs written as plain text: in Markdown's prose and in plain-text documents.

One rule for both: a URL runs from ``http://`` or ``https://`` to the first
space or delimiter, and the sentence's punctuation after it is not part of it
(``trim``). reStructuredText's ``` `text <https://…>`_ ``` gives its URL
because ``<`` and ``>`` end one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

BARE_URL = re.compile(r"\bhttps?://[^\s<>\"'`\[\]{}|\\^]+", re.IGNORECASE)
_TRAILING = ".,:;!?*_~'\""


def trim(url: str) -> str:
    """A bare URL without the sentence's punctuation after it; ``)`` only when unbalanced.

    One pass from the end (a hostile URL may end in a hundred thousand of them).
    """
    end, opened, closed = len(url), url.count("("), url.count(")")
    while end:
        last = url[end - 1]
        if last == ")" and opened < closed:
            closed -= 1
        elif last not in _TRAILING:
            break
        end -= 1
    return url[:end]


def find(text: str) -> Iterator[tuple[str, int]]:
    """Each URL written in ``text``, trimmed, with the offset where it starts."""
    for match in BARE_URL.finditer(text):
        url = trim(match.group())
        if url:
            yield url, match.start()
