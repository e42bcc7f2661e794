"""Scope: for each link, crawl it, check it, or record it as skipped or excluded.

One decision, one place, used for seeds, page links and redirect targets alike
(the mistake others made was filtering seeds one way and discovered links
another). Pure: values in, a ``Discovered`` out.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from crawler import urls
from crawler.errors import InvalidURLError
from crawler.models import Discovered, RecordedTarget, ResultClass, UrlKind
from crawler.netguard import Allowed, is_private_host, parse_networks
from crawler.patterns import Pattern, Substitution, compile_pattern, compile_substitution

if TYPE_CHECKING:
    from crawler.config import CrawlSettings

# Elements whose target is a document a person navigates to (or an in-scope
# stylesheet, parsed for its url() references): crawled when in scope.
PAGE_ELEMENTS = frozenset({"a", "area", "iframe", "frame", "meta", "seed", "sitemap", "stylesheet"})
MEMO_SIZE = 5_000
_NEW = tuple.__new__
# A re-crawl classifies every recorded link of every unchanged page again: most
# are to pages many pages link to, so these are memoized, least recently used
# first out (emptied when full, the memo classified about twice as many links).
RECORDED_MEMO_SIZE = 20_000
# Elements whose fragment names an anchor in the target document.
ANCHOR_ELEMENTS = frozenset({"a", "area", "iframe", "frame", "seed"})


@dataclass(frozen=True, slots=True)
class Scope:
    """The crawl's boundaries, built once from the settings and the seeds."""

    mode: str
    hosts: frozenset[str]
    domains: tuple[str, ...]
    prefixes: tuple[str, ...]
    include: tuple[Pattern, ...]
    exclude: tuple[Pattern, ...]
    no_follow: tuple[Pattern, ...]
    max_depth: int | None
    internal_only: bool
    exclude_all_private: bool = False
    include_fragments: bool = False
    allowed_networks: Allowed = ()
    remaps: tuple[tuple[Substitution, str], ...] = ()  # --remap, applied once per URL
    # Links every page repeats (navigation, footer, assets) are classified once.
    _memo: dict[tuple[str, ...], Discovered] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )
    _recorded: OrderedDict[tuple[str, ...], Discovered] = field(
        default_factory=OrderedDict, compare=False, hash=False, repr=False
    )

    def __reduce__(self) -> tuple[type[Scope], tuple[Any, ...]]:
        """Pickled (for a parse helper) by its settings; its memos start empty there.

        Not by the dataclass's own state, which sets each field on a frozen
        instance: compiled by mypyc (see setup.py), that assignment raises.
        """
        wanted = (f.name for f in fields(self) if not f.name.startswith("_"))
        return (Scope, tuple(getattr(self, name) for name in wanted))

    @classmethod
    def build(cls, settings: CrawlSettings, seed_keys: list[str]) -> Scope:
        """Scope around normalized seed URLs."""
        hosts = frozenset(urls.host_of(key) for key in seed_keys)
        domains = tuple(sorted({_domain_of(host) for host in hosts}))
        prefixes = tuple(sorted({key[: key.rfind("/") + 1] for key in seed_keys}))
        return cls(
            mode=settings.scope,
            hosts=hosts,
            domains=domains,
            prefixes=prefixes,
            include=tuple(compile_pattern(p) for p in settings.include),
            exclude=tuple(compile_pattern(p) for p in settings.exclude),
            no_follow=tuple(compile_pattern(p) for p in settings.no_follow),
            max_depth=settings.max_depth,
            internal_only=settings.internal_only,
            exclude_all_private=settings.exclude_all_private,
            allowed_networks=parse_networks(settings.allow_networks),
            include_fragments=settings.include_fragments,
            remaps=tuple(parse_remap(entry) for entry in settings.remap),
        )

    def is_in_scope(self, key: str, host: str) -> bool:
        """Would this URL be crawled if linked as a page?"""
        if self.mode == "host":
            return host in self.hosts
        if self.mode == "domain":
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            return any(name == d or name.endswith("." + d) for d in self.domains)
        return key.startswith(self.prefixes)

    def classify(
        self, absolute: str, *, element: str, depth: int, remap: bool = True
    ) -> Discovered:
        """Decide what to do with a resolved absolute URL found in ``element``."""
        if not urls.is_http(absolute):
            scheme = urls.scheme_of(absolute) or "none"
            return Discovered(
                url=absolute,
                host=None,
                kind=UrlKind.SKIP,
                element=element,
                result=ResultClass.SKIPPED,
                reason=f"unsupported scheme: {scheme}",
            )
        try:
            key, fragment = urls.normalize(absolute)
        except InvalidURLError as exc:
            return Discovered(
                url=absolute,
                host=None,
                kind=UrlKind.SKIP,
                element=element,
                result=ResultClass.BROKEN,
                reason=f"invalid URL: {exc}",
            )
        return self._classify_key(
            key, fragment, urls.host_of(key), element=element, depth=depth, remap=remap
        )

    def _classify_key(
        self, key: str, fragment: str, host: str, *, element: str, depth: int, remap: bool = True
    ) -> Discovered:
        """``classify`` once the URL is a key: remap, scope, filters and kind."""
        if remap and self.remaps:
            target = remapped(self.remaps, key)
            if target != key:
                whole = f"{target}#{fragment}" if fragment else target
                return self.classify(whole, element=element, depth=depth, remap=False)
        fragment = urls.decoded_fragment(fragment)
        in_scope = self.is_in_scope(key, host)
        refusal = self._refusal(key, host, in_scope)
        if refusal is not None:
            return Discovered(
                url=key,
                host=host,
                kind=UrlKind.SKIP,
                element=element,
                fragment=fragment,
                result=ResultClass.EXCLUDED,
                reason=refusal,
            )
        crawl = (
            in_scope
            and element in PAGE_ELEMENTS
            and (self.max_depth is None or depth <= self.max_depth)
            and not any(p.search(key) for p in self.no_follow)
        )
        kind = UrlKind.PAGE if crawl else UrlKind.CHECK
        if (
            kind == UrlKind.CHECK
            and self.include_fragments
            and fragment
            and element in ANCHOR_ELEMENTS
            and not fragment.startswith(":~:")
        ):
            kind = UrlKind.ANCHORS  # fetched once with GET to learn its anchors
        # A named tuple's own constructor is a Python function, compiled build or not:
        # tuple.__new__ costs a third, and this line runs for every new link of a page.
        return _NEW(Discovered, (key, host, kind, element, fragment, None, None, None, None))

    def classify_recorded(self, url: str, fragment: str, *, element: str, depth: int) -> Discovered:
        """A link as an earlier crawl recorded it (URL key, fragment), classified again.

        The URL was remapped when it was recorded, so it is not remapped twice.
        Memoized: the answer depends on the link and on whether ``depth`` is
        within ``--max-depth``, nothing else.
        """
        within = "1" if self.max_depth is None or depth <= self.max_depth else "0"
        key = (url, fragment, element, within)
        found = self._recorded.get(key)
        if found is None:
            found = self._classify_recorded(url, fragment, element=element, depth=depth)
            if len(self._recorded) >= RECORDED_MEMO_SIZE:
                self._recorded.popitem(last=False)
            self._recorded[key] = found
        else:
            self._recorded.move_to_end(key)
        return found

    def within_depth(self, depth: int) -> bool:
        """May a page at ``depth`` link hops from a seed be crawled (``--max-depth``)?"""
        return self.max_depth is None or depth <= self.max_depth

    def recorded_target(self, url: str) -> RecordedTarget:
        """What ``classify_recorded`` decides of this URL whatever the link to it.

        A link's kind is then ``recorded_kind(target, element, fragment,
        within)``: a store can classify a page's recorded links from one
        answer per URL (SQLite does it in SQL, ``store/sqlite/recorded.py``).
        """
        found = self.classify(url, element="a", depth=0, remap=False)
        if found.kind == UrlKind.SKIP:
            return RecordedTarget(found.result, found.reason, crawlable=False)
        return RecordedTarget(None, None, crawlable=found.kind == UrlKind.PAGE)

    def _classify_recorded(
        self, url: str, fragment: str, *, element: str, depth: int
    ) -> Discovered:
        found = self.classify(url, element=element, depth=depth, remap=False)
        if not fragment or found.fragment == fragment:
            return found
        if found.host is None:  # not HTTP, or invalid: skipped whatever its fragment
            return found._replace(fragment=fragment)
        return self._classify_key(
            found.url, fragment, found.host, element=element, depth=depth, remap=False
        )

    def classify_link(
        self, raw: str, base: str, encoding: str, *, element: str, depth: int
    ) -> Discovered:
        """Resolve a link as found on a page and classify it, memoized where that is exact.

        A root-relative link ("/about") depends only on the base's origin, a
        path-relative one ("../x") on the base up to its last "/", an absolute
        one on nothing of the base, so those are cached by that. Plain links
        missing from the cache resolve by string slicing (``urls.resolve_key``).
        """
        within = "1" if self.max_depth is None or depth <= self.max_depth else "0"
        if raw[:1] == "/" and raw[1:2] not in ("/", "\\"):
            key: tuple[str, ...] | None = (raw, _origin(base), encoding, element, within)
        elif raw.startswith(("http://", "https://")):
            key = (raw, "", encoding, element, within)
        elif raw[:1] not in ("#", "?", ""):
            # A path-relative link depends on the base only up to its last "/".
            key = (raw, base[: base.rfind("/") + 1], encoding, element, within)
        else:
            key = None
        if key is not None:
            found = self._memo.get(key)
            if found is not None:
                return found
        plain = urls.resolve_key(raw, base) if urls.is_key(base) else None
        if plain is not None:
            found = self._classify_key(
                plain[0], plain[1], urls.host_of(base), element=element, depth=depth
            )
        else:
            found = self.classify(resolve_link(raw, base, encoding), element=element, depth=depth)
        if key is not None:
            if len(self._memo) >= MEMO_SIZE:
                # Emptied, not trimmed: deleting a dict's oldest keys one by one
                # makes each next(iter()) skip all the holes left before it.
                self._memo.clear()
            self._memo[key] = found
        return found

    def _refusal(self, key: str, host: str, in_scope: bool) -> str | None:
        """Why this URL is excluded from checking, or None."""
        if self._is_excluded(key):
            return "excluded by filter"
        if self.exclude_all_private and is_private_host(host, self.allowed_networks):
            return "private address (--exclude-all-private)"
        if self.internal_only and not in_scope:
            return "out of scope (--internal-only)"
        return None

    def _is_excluded(self, key: str) -> bool:
        # As in lychee: an include match wins over every exclude.
        if self.include and any(p.search(key) for p in self.include):
            return False
        if any(p.search(key) for p in self.exclude):
            return True
        # Includes alone mean "only these".
        return bool(self.include) and not self.exclude


def recorded_kind(
    target: RecordedTarget, element: str, fragment: str, *, within: bool, include_fragments: bool
) -> UrlKind:
    """The kind ``classify_recorded`` gives a link, from its target's ``recorded_target``.

    The rule ``_classify_key`` applies, in the order it applies it; the SQL
    of ``store/sqlite/recorded.py`` is this function's twin.
    """
    if target.skipped is not None:
        return UrlKind.SKIP
    if target.crawlable and element in PAGE_ELEMENTS and within:
        return UrlKind.PAGE
    if (
        include_fragments
        and fragment
        and element in ANCHOR_ELEMENTS
        and not fragment.startswith(":~:")
    ):
        return UrlKind.ANCHORS
    return UrlKind.CHECK


def parse_remap(entry: str) -> tuple[Substitution, str]:
    """``'REGEX REPLACEMENT'`` as an RE2 pattern and its template (lychee's ``$1`` too).

    RE2, as for every user pattern (``crawler.patterns``): a remap runs on
    every URL of the crawl, so it must not backtrack.
    """
    pattern, replacement = entry.split()
    template = re.sub(r"\$\{?(\d+)\}?", r"\\\1", replacement)
    return compile_substitution(pattern), template


def remapped(remaps: tuple[tuple[Substitution, str], ...], url: str) -> str:
    """The URL after the first matching ``--remap`` (unchanged when none matches)."""
    for pattern, replacement in remaps:
        if pattern.search(url):
            return pattern.sub(replacement, url, count=1)
    return url


def _origin(base: str) -> str:
    """scheme://authority of an absolute URL."""
    start = base.find("//") + 2
    end = base.find("/", start)
    return base if end < 0 else base[:end]


def _domain_of(host: str) -> str:
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return name[4:] if name.startswith("www.") else name


def resolve_link(raw: str, base: str, encoding: str) -> str:
    """Resolve a link; an unparsable one comes back as-is, to be recorded as invalid."""
    try:
        return urls.resolve(raw, base, encoding)
    except InvalidURLError:
        return raw.strip()
