"""Opening crawl databases: identity, migrations, refusal of foreign files, disk full."""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from crawler.errors import DiskFullError, ForeignDatabaseError
from crawler.models import Discovered, Outcome, Result, ResultClass, UrlKind, UrlState
from crawler.store import migrate
from crawler.store.sqlite import crawls, db, results
from crawler.store.sqlite.db import APPLICATION_ID, open_database
from crawler.store.sqlite.frontier import Frontier

T0 = 1_000_000.0
VIEWS = {
    "link",
    "url_result",
    "redirect_chain",
    "resolved",
    "broken_links",
    "redirects",
    "slowest",
    "host_summary",
}
TABLES = {
    "crawl",
    "host",
    "url",
    "result",
    "link_open",
    "link_run",
    "link_fresh",
    "link_settled",
    "worker",
    "_migrations",
}


@contextlib.contextmanager
def opened(path: Path) -> Iterator[sqlite3.Connection]:
    conn = open_database(path)
    try:
        yield conn
    finally:
        conn.close()


def schema(conn: sqlite3.Connection) -> list[tuple[str, str, str | None]]:
    return conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def crawler_db_with_data(path: Path, urls: int = 300) -> None:
    """A real crawl database, closed cleanly (so the WAL is folded into the file)."""
    with opened(path) as conn:
        crawl_id = crawls.create(conn, ["http://a.test/"], {}, T0)
        frontier = Frontier(conn, crawl_id)
        frontier.enqueue(
            [
                Discovered(f"http://a.test/{i:04d}", "a.test", UrlKind.PAGE, "a")
                for i in range(urls)
            ],
            T0,
        )
    assert not path.with_name(path.name + "-wal").exists()


# -- opening ---------------------------------------------------------------------


def test_new_file_gets_identity_schema_and_views(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    with opened(path) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("PRAGMA user_version").fetchone()[0] == migrate.latest_version()
        assert migrate.latest_version() >= 2
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        names = {(t, n) for t, n, _ in schema(conn)}
        assert {("view", v) for v in VIEWS} <= names
        assert {("table", t) for t in TABLES} <= names
        applied = [v for (v,) in conn.execute("SELECT version FROM _migrations ORDER BY version")]
        assert applied == [v for v, _, _ in migrate.available()]
        for name in VIEWS:  # every view compiles and runs on an empty database
            assert conn.execute(f"SELECT * FROM {name}").fetchall() == []


def test_empty_file_is_a_new_database(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with opened(path) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def test_a_new_file_takes_the_store_page_size_and_an_old_one_keeps_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The page size is what a random insert rewrites: new files take the small
    # one, while a file made with another keeps it (WAL files cannot change it).
    new = tmp_path / "new.db"
    with opened(new) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == db.PAGE_SIZE_BYTES == 1024
    old = tmp_path / "old.db"
    monkeypatch.setattr(db, "PAGE_SIZE_BYTES", 4096)
    with opened(old):
        pass
    monkeypatch.undo()
    with opened(old) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096
        wal_pages = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        assert wal_pages * 4096 == db.AUTOCHECKPOINT_BYTES


def test_reopening_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    with opened(path) as conn:
        crawl_id = crawls.create(conn, ["http://a.test/"], {"max_redirects": 3}, T0)
        first = schema(conn)
        migrations = conn.execute("SELECT * FROM _migrations").fetchall()
    for _ in range(2):
        with opened(path) as conn:
            assert schema(conn) == first
            assert conn.execute("SELECT * FROM _migrations").fetchall() == migrations
            assert conn.execute("PRAGMA user_version").fetchone()[0] == migrate.latest_version()
            record = crawls.get(conn)
            assert (record.id, record.seeds, record.config) == (
                crawl_id,
                ["http://a.test/"],
                {"max_redirects": 3},
            )


def test_a_second_connection_while_the_first_is_open(tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    with opened(path) as first, opened(path) as second:
        crawls.create(first, ["http://a.test/"], {}, T0)
        assert second.execute("SELECT count(*) FROM crawl").fetchone()[0] == 1


# -- refusal ---------------------------------------------------------------------


def _text_file(path: Path) -> None:
    path.write_text("these are my notes, not a database\n" * 50, encoding="utf-8")


def _foreign_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        conn.execute("INSERT INTO invoices (total) VALUES (12.5)")
        conn.commit()
    finally:
        conn.close()


def _newer_schema(path: Path) -> None:
    crawler_db_with_data(path, urls=3)
    conn = sqlite3.connect(path)
    try:
        conn.execute(f"PRAGMA user_version = {migrate.latest_version() + 1}")
    finally:
        conn.close()


def _truncated(path: Path) -> None:
    whole = path.with_name("whole.db")
    crawler_db_with_data(whole)
    data = whole.read_bytes()
    assert len(data) > 4096
    path.write_bytes(data[:1000])


@pytest.mark.parametrize(
    "make",
    [_text_file, _foreign_sqlite, _newer_schema, _truncated],
    ids=["text", "foreign-sqlite", "newer-schema", "truncated"],
)
def test_foreign_file_is_refused_and_left_untouched(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    path = tmp_path / "crawl.db"
    make(path)
    before = sha256(path)
    with pytest.raises(ForeignDatabaseError, match=r"crawl\.db"):
        open_database(path)
    assert sha256(path) == before
    with pytest.raises(ForeignDatabaseError):  # and again: still refused, still untouched
        open_database(path)
    assert sha256(path) == before


def test_newer_schema_message_names_both_versions(tmp_path: Path) -> None:
    path = tmp_path / "crawl.db"
    _newer_schema(path)
    latest = migrate.latest_version()
    with pytest.raises(ForeignDatabaseError, match=rf"schema {latest + 1}.*knows {latest}"):
        open_database(path)


def test_directory_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a-directory"
    path.mkdir()
    with pytest.raises(ForeignDatabaseError, match="directory"):
        open_database(path)
    assert list(path.iterdir()) == []


def test_missing_directory_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "crawl.db"
    with pytest.raises(ForeignDatabaseError, match="does not exist"):
        open_database(path)
    assert not path.parent.exists()
    assert list(tmp_path.iterdir()) == []


# -- disk full -------------------------------------------------------------------


def _disk_full_setup(conn: sqlite3.Connection) -> tuple[Frontier, Outcome]:
    """A crawl with one leased page whose completion needs many new pages of disk."""
    crawl_id = crawls.create(conn, ["http://a.test/"], {}, T0)
    frontier = Frontier(conn, crawl_id)
    frontier.enqueue(
        [Discovered(f"http://a.test/seed{i}", "a.test", UrlKind.PAGE, "a") for i in range(50)],
        T0,
    )
    (page,) = frontier.lease("w1", 1, 60, T0)
    children = [
        Discovered(f"http://b{i % 7}.test/{'x' * 200}/{i}", f"b{i % 7}.test", UrlKind.CHECK, "a")
        for i in range(400)
    ]
    return frontier, Outcome(page, Result(ResultClass.OK, status=200), children=children)


def _fill_up(conn: sqlite3.Connection) -> None:
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    assert conn.execute(f"PRAGMA max_page_count = {pages}").fetchone()[0] == pages


def test_disk_full_during_complete_rolls_back_cleanly(tmp_path: Path) -> None:
    with opened(tmp_path / "crawl.db") as conn:
        frontier, done = _disk_full_setup(conn)
        page = done.leased
        _fill_up(conn)
        with pytest.raises(DiskFullError):
            frontier.complete("w1", [done], T0 + 1)

        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert not conn.in_transaction
        state, owner = conn.execute(
            "SELECT state, lease_owner FROM url WHERE id = ?", (page.id,)
        ).fetchone()
        assert (state, owner) == (UrlState.LEASED, "w1")
        assert conn.execute("SELECT count(*) FROM url").fetchone()[0] == 50
        assert conn.execute("SELECT count(*) FROM host").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM result").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM link").fetchone()[0] == 0

        # Room again: the same completion, from a Frontier with fresh caches, goes through whole.
        conn.execute("PRAGMA max_page_count = 1000000")
        fresh = Frontier(conn, frontier.crawl_id)
        assert fresh.complete("w1", [done], T0 + 2) == [True]
        assert conn.execute("SELECT state FROM url WHERE id = ?", (page.id,)).fetchone()[0] == 2
        assert conn.execute("SELECT count(*) FROM url").fetchone()[0] == 50 + 400
        assert conn.execute("SELECT count(*) FROM link").fetchone()[0] == 400
        assert conn.execute("SELECT count(*) FROM result").fetchone()[0] == 1
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_same_frontier_retries_after_disk_full(tmp_path: Path) -> None:
    with opened(tmp_path / "crawl.db") as conn:
        frontier, done = _disk_full_setup(conn)
        _fill_up(conn)
        with pytest.raises(DiskFullError):
            frontier.complete("w1", [done], T0 + 1)
        conn.execute("PRAGMA max_page_count = 1000000")
        assert frontier.complete("w1", [done], T0 + 2) == [True]
        assert conn.execute("SELECT count(*) FROM url").fetchone()[0] == 50 + 400
        assert conn.execute("SELECT count(*) FROM link").fetchone()[0] == 400
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


@pytest.mark.parametrize("name", ["my#crawl.db", "what?.db", "100%41.db"])
def test_foreign_file_with_uri_characters_in_its_name_is_refused(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    _foreign_sqlite(path)
    before = sha256(path)
    with pytest.raises(ForeignDatabaseError):
        open_database(path)
    assert sha256(path) == before
    assert [p.name for p in tmp_path.iterdir()] == [name]


@pytest.mark.parametrize("name", ["my#crawl.db", "what?.db", "100%41.db"])
def test_own_database_with_uri_characters_in_its_name_reopens(tmp_path: Path, name: str) -> None:
    open_database(tmp_path / name).close()
    open_database(tmp_path / name).close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_links_merged_before_runs_become_run_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Migration 0020 moves a file's merged open links into a run of their own.
    path = tmp_path / "old.db"
    newest = migrate.available
    before_runs = [m for m in newest() if m[0] < 20]
    monkeypatch.setattr(migrate, "available", lambda dialect="sqlite": before_runs)
    old = sqlite3.connect(path, isolation_level=None)
    assert migrate.apply(old, APPLICATION_ID) < 20
    crawl_id = crawls.create(old, ["http://a.test/"], {}, T0)
    add = "INSERT INTO url (crawl_id, url, kind, depth, state) VALUES (?, ?, 3, ?, 2)"
    ids = [old.execute(add, (crawl_id, f"http://a.test/{n}", n)).lastrowid for n in range(3)]
    old.execute(
        "INSERT INTO result (url_id, class, status, checked_at) VALUES (?, 'ok', 200, 0), "
        "(?, 'ok', 200, 0), (?, 'broken', 404, 0)",
        ids,
    )
    old.executemany(
        "INSERT INTO link_open (target_id, source_id, fragment, element, at) "
        "VALUES (?, ?, '', 'a', NULL)",
        [(ids[2], ids[0]), (ids[2], ids[1]), (ids[1], ids[0])],
    )
    old.close()
    monkeypatch.setattr(migrate, "available", newest)
    with opened(path) as conn:
        assert conn.execute("SELECT id, rows FROM link_run").fetchall() == [(1, 3)]
        runs = conn.execute("SELECT DISTINCT run FROM link_open").fetchall()
        assert runs == [(1,)]
        broken = results.broken_links(conn, crawl_id)
        assert [(b.url, sorted(b.sources)) for b in broken] == [
            ("http://a.test/2", ["http://a.test/0", "http://a.test/1"])
        ]


def test_a_file_without_merged_links_gets_no_run(tmp_path: Path) -> None:
    with opened(tmp_path / "new.db") as conn:
        assert conn.execute("SELECT count(*) FROM link_run").fetchone()[0] == 0
