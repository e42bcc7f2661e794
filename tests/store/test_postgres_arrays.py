"""Array parameters as literals (``crawler.store.postgres.arrays``) read back as the values sent."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawler.store.postgres import arrays

# PostgreSQL's text holds any character but NUL.
TEXT = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)))


@pytest.fixture
async def conn(pg_url: str) -> AsyncIterator[Any]:
    conn = await asyncpg.connect(pg_url)
    try:
        yield conn
    finally:
        await conn.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(
        st.one_of(st.none(), TEXT, st.sampled_from(['"', "\\", "{}", "NULL", " a, b ", ""]))
    )
)
async def test_texts_read_back_as_sent(conn: Any, values: list[str | None]) -> None:
    assert await conn.fetchval("SELECT $1::text::text[]", arrays.texts(values)) == values


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))))
async def test_integers_read_back_as_sent(conn: Any, values: list[int | None]) -> None:
    assert await conn.fetchval("SELECT $1::text::bigint[]", arrays.numbers(values)) == values


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(st.one_of(st.none(), st.floats())))
async def test_floats_read_back_as_sent(conn: Any, values: list[float | None]) -> None:
    got = await conn.fetchval("SELECT $1::text::double precision[]", arrays.numbers(values))
    assert len(got) == len(values)
    for sent, read in zip(values, got, strict=True):
        if sent is None or read is None:
            assert sent is read
        elif math.isnan(sent):
            assert math.isnan(read)
        else:
            assert read == sent


async def test_booleans_and_empty_arrays(conn: Any) -> None:
    assert await conn.fetchval(
        "SELECT $1::text::boolean[]", arrays.numbers([True, None, False])
    ) == [
        True,
        None,
        False,
    ]
    assert await conn.fetchval("SELECT $1::text::text[]", arrays.texts([])) == []
    assert await conn.fetchval("SELECT $1::text::integer[]", arrays.numbers([])) == []
