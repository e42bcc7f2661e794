"""The user's regular expressions (include, exclude, no-follow, basic-auth URLs), compiled with RE2.

A pattern comes from whoever configures a crawl, which for the service is
anyone with its token. Python's ``re`` backtracks: ``(a+)+$`` against a link
``/aaaa…a!`` takes exponential time, and a scope decision runs on the event
loop, so one pattern froze the whole service. RE2 (``google-re2``, Google's
engine with official wheels) matches in time linear in the URL, always.

Its syntax is Python's for everything a URL filter needs (classes, ``\\d``,
``\\b``, ``(?i)``, named groups, ``^``/``$``) and refuses what needs
backtracking: look-ahead and look-behind (``(?=``, ``(?!``, ``(?<=``,
``(?<!``), backreferences (``\\1``), possessive quantifiers and atomic groups.
Such a pattern is refused when the settings are read, with RE2's reason:
``invalid regular expression '(?!x)': invalid perl operator: (?! (RE2 syntax:
no look-around, no backreferences)``.
"""

from __future__ import annotations

import functools
from typing import Any, Protocol

RE2_NOTE = "RE2 syntax: no look-around, no backreferences"


class Pattern(Protocol):
    """What the crawl asks of a compiled pattern."""

    def search(self, text: str) -> object | None: ...


class Substitution(Pattern, Protocol):
    """A pattern whose groups a replacement refers to (``--remap``)."""

    def sub(self, repl: str, text: str, count: int = 0) -> str: ...


def compile_pattern(pattern: str) -> Pattern:
    """The pattern, compiled; ValueError with RE2's reason when it is refused."""
    compiled: Pattern = _compile(pattern, capturing=False)
    return compiled


def compile_substitution(pattern: str) -> Substitution:
    """The pattern with its groups, for ``sub`` (replacements say ``\\1``); as above."""
    compiled: Substitution = _compile(pattern, capturing=True)
    return compiled


@functools.cache
def _re2() -> tuple[Any, Any, Any]:
    """RE2 and its two option sets, imported on first use (most crawls have no pattern)."""
    import re2  # type: ignore[import-untyped]  # google-re2 ships no type hints

    matching = re2.Options()
    matching.log_errors = False  # the error is ours to report, not absl's on stderr
    matching.never_capture = True  # only "does it match?" is asked: faster
    capturing = re2.Options()  # --remap's replacements refer to groups
    capturing.log_errors = False
    return re2, matching, capturing


def _compile(pattern: str, *, capturing: bool) -> Any:  # re2's compiled type is untyped
    re2, matching, with_groups = _re2()
    try:
        return re2.compile(pattern, options=with_groups if capturing else matching)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ValueError(f"invalid regular expression {pattern!r}: {reason} ({RE2_NOTE})") from None
