"""The writers' URL cache: bounded, never wrong, and honest about what it dropped."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from crawler.models import UrlKind
from crawler.store import url_cache
from crawler.store.url_cache import UrlCache


def test_an_entry_packs_and_unpacks_every_field() -> None:
    for url_id in (1, 2, 1 << 40):
        for kind in UrlKind:
            for settled in (False, True):
                entry = url_cache.pack(url_id, int(kind), settled)
                assert url_cache.row_id(entry) == url_id
                assert url_cache.kind_of(entry) == kind
                assert url_cache.is_settled(entry) is settled


def test_a_hit_in_the_old_generation_survives_the_next_rotation() -> None:
    cache = UrlCache(4)  # two generations of two
    cache.put("a", 1)
    cache.put("b", 2)  # young full: a and b are the old generation now
    assert cache.get("a") == 1  # moved to the young generation
    assert len(cache) == 2  # moved, not copied
    cache.put("c", 3)  # young full again: b dropped, a and c kept
    assert cache.dropped
    assert cache.get("b") is None
    assert (cache.get("a"), cache.get("c")) == (1, 3)


def test_a_lookup_alone_can_drop_entries_and_says_so() -> None:
    cache = UrlCache(4)
    for url, entry in (("a", 1), ("b", 2), ("c", 3)):
        cache.put(url, entry)
    assert not cache.dropped  # old: a, b; young: c
    assert cache.get("a") == 1  # moving a fills the young generation: b goes
    assert cache.dropped
    assert "b" not in cache


def test_settle_marks_an_entry_settled_and_keeps_the_rest() -> None:
    cache = UrlCache(100)
    cache.put("p", url_cache.pack(7, int(UrlKind.PAGE), False))
    cache.settle("p")
    cache.settle("absent")  # nothing to settle: nothing added
    entry = cache.get("p")
    assert entry is not None
    assert url_cache.is_settled(entry)
    assert url_cache.row_id(entry) == 7
    assert "absent" not in cache


def test_shrinking_below_what_it_holds_empties_it_and_says_so() -> None:
    cache = UrlCache(100)
    for url, entry in (("a", 1), ("b", 2), ("c", 3)):
        cache.put(url, entry)
    cache.resize(2)
    assert cache.dropped
    assert len(cache) == 0
    assert cache.capacity == 2


@given(
    capacity=st.integers(min_value=1, max_value=12),
    steps=st.lists(
        st.tuples(st.sampled_from(["get", "put", "settle"]), st.integers(0, 20)),
        max_size=120,
    ),
)
def test_the_cache_is_a_bounded_subset_of_what_was_put(
    capacity: int, steps: list[tuple[str, int]]
) -> None:
    """Every hit is the latest value put; the size stays bounded; no drop goes unsaid."""
    cache = UrlCache(capacity)
    model: dict[str, int] = {}
    for op, n in steps:
        url = f"u{n}"
        if op == "put":
            cache.put(url, n << 3)
            model[url] = n << 3
        elif op == "settle":
            held = url in cache
            cache.settle(url)
            if held:
                model[url] |= 1
        else:
            got = cache.get(url)
            assert got is None or got == model[url]
        assert len(cache) <= cache.capacity
        if not cache.dropped:  # ``in`` moves nothing, so it cannot drop anything itself
            assert all(u in cache for u in model)
