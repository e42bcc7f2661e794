"""A state machine drives a store with several owners and a fake clock, on both backends.

The model says which URL keys exist, who holds which lease until when, and how
often each row was completed; after every step the database must agree with it.
Kinds are PAGE only, so no row is ever legitimately completed twice.

The machine talks to a ``FrontierStore`` only through the contract, and looks
inside through ``backends.Backend``. SQLite gets a new file per example;
PostgreSQL one database for the whole run (a new crawl per example, every
question asked by crawl) and fewer examples, since each step is a few round
trips to the server.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from backends import Backend, PostgresBackend, SqliteBackend
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from crawler.config import CrawlSettings
from crawler.models import Discovered, LeasedUrl, Outcome, Result, ResultClass, UrlKind
from crawler.store import open as store_open
from crawler.store.contract import FrontierStore

from kit.pgkit import create_database, drop_database, require_postgres

KEYS = [f"http://h{i % 3}.test/p{i}" for i in range(30)]
OWNERS = ["x", "y", "z"]
TTL = 10.0
T0 = 1_000_000.0
PENDING, LEASED, DONE = 0, 1, 2
OK = Result(ResultClass.OK, status=200)
T = TypeVar("T")
_pg_database: list[str] = []  # created by the first PostgreSQL example, dropped at the end


@pytest.fixture(autouse=True, scope="module")
def _drop_pg_database() -> Iterator[None]:
    yield
    while _pg_database:
        drop_database(_pg_database.pop())


def page(key: str) -> Discovered:
    return Discovered(url=key, host=key.split("/")[2], kind=UrlKind.PAGE, element="a")


@dataclass
class ModelRow:
    state: int = PENDING
    owner: str | None = None
    expires: float | None = None
    next_attempt_at: float = 0.0
    attempts: int = 0
    completions: int = 0


class FrontierMachine(RuleBasedStateMachine):
    backend_name = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self._dir = tempfile.TemporaryDirectory()
        self.loop = asyncio.new_event_loop()
        self.db = self._backend()
        self.frontier: FrontierStore = store_open.create_crawl(self.db.db, [], CrawlSettings())
        self.crawl_id = self.frontier.crawl_id
        # A small seen cache, so both the cache and the UNIQUE key do dedup work.
        self.db.shrink_seen_cache(self.frontier, 8)
        self.now = T0
        self.model: dict[str, ModelRow] = {}
        self.edges: set[tuple[str, str]] = set()
        # What each owner believes it holds; stale entries stay until used.
        self.held: dict[str, dict[int, LeasedUrl]] = {o: {} for o in OWNERS}
        self.finished = False

    def _backend(self) -> Backend:
        if self.backend_name == "sqlite":
            return SqliteBackend(Path(self._dir.name) / "crawl.db")
        require_postgres()
        if not _pg_database:
            _pg_database.append(create_database())
        return PostgresBackend(_pg_database[0])

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.frontier.close()
        self.run(self.db.close())
        self.loop.close()
        self._dir.cleanup()

    # -- helpers ------------------------------------------------------------------

    def _holds(self, owner: str, leased: LeasedUrl) -> bool:
        row = self.model[leased.url]
        return row.state == LEASED and row.owner == owner

    def _complete(self, owner: str, batch: list[tuple[LeasedUrl, list[str] | None, float]]) -> None:
        """Complete (children list) or retry (children None, retry delay) a batch."""
        outcomes = []
        for leased, children, delay in batch:
            if children is None:
                retry_at = self.now + delay if delay else None
                outcomes.append(Outcome(leased, None, retry_at=retry_at))
            else:
                outcomes.append(Outcome(leased, OK, children=[page(k) for k in children]))
        known_before = set(self.model)
        accepted = self.run(self.frontier.complete(owner, outcomes, self.now))

        expected = []
        for leased, children, delay in batch:
            ok = self._holds(owner, leased)
            expected.append(ok)
            self.held[owner].pop(leased.id, None)
            if not ok:
                continue
            row = self.model[leased.url]
            row.owner, row.expires = None, None
            row.attempts += 1
            if children is None:
                row.state = PENDING
                row.next_attempt_at = self.now + delay
            else:
                row.state = DONE
                row.completions += 1
                for key in children:
                    self.model.setdefault(key, ModelRow())
                    self.edges.add((leased.url, key))
        assert accepted == expected
        if not any(expected):
            assert set(self._db_rows()) == known_before  # a rejected batch adds nothing

    def _db_rows(self) -> dict[str, tuple[int, str | None, float | None, float, int]]:
        return {
            url: (r.state, r.lease_owner, r.lease_expires_at, r.next_attempt_at, r.attempts)
            for url, r in self.run(self.db.rows(self.crawl_id)).items()
        }

    def _outstanding(self) -> bool:
        return any(r.state in (PENDING, LEASED) for r in self.model.values())

    # -- rules --------------------------------------------------------------------

    @initialize(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3))
    def seeds(self, keys: list[str]) -> None:
        self.enqueue(keys)

    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=4))
    def enqueue(self, keys: list[str]) -> None:
        if self.finished:
            return  # the engine stops feeding a finished crawl
        new = {k for k in keys if k not in self.model}
        assert self.run(self.frontier.enqueue([page(k) for k in keys], self.now)) == len(new)
        for key in new:
            self.model[key] = ModelRow()

    @rule(owner=st.sampled_from(OWNERS), limit=st.integers(1, 5))
    def lease(self, owner: str, limit: int) -> None:
        due = {
            k for k, r in self.model.items() if r.state == PENDING and r.next_attempt_at <= self.now
        }
        rows = self.run(self.db.rows(self.crawl_id))
        in_order = sorted(
            (r.depth - (r.kind < UrlKind.PAGE), r.kind, r.id, url)
            for url, r in rows.items()
            if r.state == PENDING and r.next_attempt_at <= self.now
        )
        got = self.run(self.frontier.lease(owner, limit, TTL, self.now))
        keys = [g.url for g in got]
        assert len(keys) == len(set(keys)) == min(limit, len(due))
        assert set(keys) <= due, "handed out a row that is leased or done or not due"
        assert keys == [url for *_, url in in_order[:limit]], "not the contract's lease order"
        for leased in got:
            row = self.model[leased.url]
            row.state, row.owner, row.expires = LEASED, owner, self.now + TTL
            assert leased.attempts == row.attempts
            self.held[owner][leased.id] = leased

    def _current(self) -> list[tuple[str, LeasedUrl]]:
        """(owner, lease) pairs the owner really still holds, in a stable order."""
        return [
            (o, self.held[o][i])
            for o in OWNERS
            for i in sorted(self.held[o])
            if self._holds(o, self.held[o][i])
        ]

    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        current = self._current()
        if not current:
            return
        owner = data.draw(st.sampled_from(sorted({o for o, _ in current})))
        mine = [leased for o, leased in current if o == owner]
        chosen = data.draw(st.lists(st.sampled_from(mine), min_size=1, max_size=3, unique=True))
        batch: list[tuple[LeasedUrl, list[str] | None, float]] = []
        for leased in chosen:
            children = data.draw(st.lists(st.sampled_from(KEYS), max_size=4))
            batch.append((leased, children, 0.0))
        self._complete(owner, batch)

    @rule(data=st.data(), delay=st.sampled_from([0.0, 3.0, 20.0]))
    def retry(self, data: st.DataObject, delay: float) -> None:
        current = self._current()
        if not current:
            return
        owner, leased = data.draw(st.sampled_from(current))
        self._complete(owner, [(leased, None, delay)])

    @rule(data=st.data())
    def stale_completion(self, data: st.DataObject) -> None:
        """An owner whose lease was reclaimed (and maybe taken over) reports late."""
        stale = [
            (o, leased)
            for o in OWNERS
            for leased in self.held[o].values()
            if not self._holds(o, leased)
        ]
        if not stale:
            return
        owner, leased = data.draw(st.sampled_from(stale))
        before = self._db_rows()
        children = [k for k in KEYS if k not in self.model][:2]
        self._complete(owner, [(leased, children, 0.0)])
        assert self._db_rows() == before

    @rule(data=st.data(), thief=st.sampled_from(OWNERS))
    def take_over(self, data: st.DataObject, thief: str) -> None:
        """Expire a lease, reclaim it, lease it to another owner; the old one reports late."""
        current = self._current()
        if not current:
            return
        owner, leased = data.draw(st.sampled_from(current))
        if thief == owner:
            thief = OWNERS[(OWNERS.index(owner) + 1) % len(OWNERS)]
        self.expire()
        self.reclaim()
        self.lease(thief, len(KEYS))
        assert self.model[leased.url].owner == thief
        before = self._db_rows()
        late_children = [k for k in KEYS if k not in self.model][:2]
        self._complete(owner, [(leased, late_children, 0.0)])
        assert self._db_rows() == before

    @rule(dt=st.sampled_from([1.0, 4.0]))
    def advance(self, dt: float) -> None:
        self.now += dt

    @rule()
    def expire(self) -> None:
        """Jump the clock just past the last lease's expiry: every lease is now expired."""
        expiries = [r.expires for r in self.model.values() if r.expires is not None]
        if expiries:
            self.now = max(self.now, max(expiries) + 0.5)

    @rule()
    def reclaim(self) -> None:
        expired = [
            r
            for r in self.model.values()
            if r.state == LEASED and r.expires is not None and r.expires < self.now
        ]
        assert self.run(self.frontier.reclaim(self.now, stale_after_s=1e9)) == len(expired)
        for row in expired:
            row.state, row.owner, row.expires = PENDING, None, None

    @rule()
    def finish(self) -> None:
        result = self.run(self.frontier.finish_if_quiescent(self.now))
        assert result is (not self._outstanding())
        if self.finished:
            assert result, "work reappeared after the crawl finished"
        state, _ = self.run(self.db.crawl_state(self.crawl_id))
        assert state == ("finished" if result or self.finished else "running")
        if result:
            self.finished = True
            counts = self.run(self.frontier.counts())
            assert (counts.pending, counts.leased) == (0, 0)
            assert self.run(self.frontier.lease("x", 100, TTL, self.now)) == []

    # -- invariants -----------------------------------------------------------------

    @invariant()
    def database_matches_model(self) -> None:
        ((total, distinct),) = self.run(
            self.db.fetch(
                "SELECT count(*), count(DISTINCT url) FROM url WHERE crawl_id = ?", self.crawl_id
            )
        )
        assert total == distinct, "a URL key appears twice"
        db = self._db_rows()
        assert set(db) == set(self.model), "a key was lost or invented"
        for key, row in self.model.items():
            state, owner, expires, next_at, attempts = db[key]
            assert (state, owner, expires) == (row.state, row.owner, row.expires), key
            assert attempts == row.attempts, key
            if row.state == PENDING:
                assert next_at == row.next_attempt_at, key
            assert row.completions <= 1
            assert row.completions == (row.state == DONE)

        counts = self.run(self.frontier.counts())
        assert counts.pending + counts.leased + counts.done == len(self.model)
        assert counts.leased == sum(r.state == LEASED for r in self.model.values())
        assert counts.done == sum(r.state == DONE for r in self.model.values())

    @invariant()
    def results_and_links_match_model(self) -> None:
        with_result = set(self.run(self.db.results(self.crawl_id)))
        assert with_result == {k for k, r in self.model.items() if r.state == DONE}
        edges = {(s, t) for s, t, _, _ in self.run(self.db.links(self.crawl_id))}
        assert edges == self.edges


class PostgresFrontierMachine(FrontierMachine):
    backend_name = "postgresql"


FrontierMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
PostgresFrontierMachine.TestCase.settings = settings(
    max_examples=15, stateful_step_count=30, deadline=None
)
TestSqliteFrontierMachine = FrontierMachine.TestCase
TestPostgresFrontierMachine = PostgresFrontierMachine.TestCase
