"""Crawl invariants on random site graphs (hypothesis), against real loopback servers.

On every generated site: every reachable in-scope page is fetched exactly once,
nothing unreachable is requested, out-of-scope pages are checked but never
parsed, every broken link is reported with exactly its source pages, and the
crawl terminates. On both backends: the examples of one backend share its
database (``any_db``), each a crawl of its own, read back as the latest one.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.crawlkit import crawl
from kit.sitekit import Page, SiteServer


@dataclass(frozen=True)
class Node:
    kind: str  # "page", "missing", "redirect"
    links: tuple[tuple[str, int, int], ...] = ()  # (where: "in"/"ext", index, form)
    target: int = 0


@dataclass(frozen=True)
class Graph:
    nodes: tuple[Node, ...]
    externals: tuple[bool, ...]  # True: answers 200, False: 404


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    n = draw(st.integers(min_value=1, max_value=16))
    m = draw(st.integers(min_value=0, max_value=3))
    link = st.one_of(
        st.tuples(st.just("in"), st.integers(0, n - 1), st.integers(0, 3)),
        *([st.tuples(st.just("ext"), st.integers(0, m - 1), st.just(0))] if m else []),
    )
    nodes = [Node("page", tuple(draw(st.lists(link, max_size=6))))]
    redirects = 0
    for _ in range(1, n):
        kind = draw(st.sampled_from(["page", "page", "page", "missing", "redirect"]))
        if kind == "redirect" and redirects >= 4:
            kind = "page"
        if kind == "redirect":
            redirects += 1
            nodes.append(Node("redirect", target=draw(st.integers(0, n - 1))))
        elif kind == "missing":
            nodes.append(Node("missing"))
        else:
            nodes.append(Node("page", tuple(draw(st.lists(link, max_size=6)))))
    externals = tuple(draw(st.lists(st.booleans(), min_size=m, max_size=m)))
    return Graph(tuple(nodes), externals)


def _href(server: SiteServer, index: int, form: int) -> str:
    path = f"/n{index}"
    return [path, path + "#frag", server.url(path), f"./x/..{path}"][form]


def build_sites(graph: Graph, main: SiteServer, ext: SiteServer) -> None:
    for i, node in enumerate(graph.nodes):
        if node.kind == "page":
            links = [
                _href(main, idx, form) if where == "in" else ext.url(f"/e{idx}")
                for where, idx, form in node.links
            ]
            main.site[f"/n{i}"] = Page(links=links)
        elif node.kind == "redirect":
            main.site[f"/n{i}"] = Page(redirect_to=f"/n{node.target}")
    for j, ok in enumerate(graph.externals):
        if ok:
            ext.site[f"/e{j}"] = Page(links=["/never-parsed"])


def expected(graph: Graph) -> tuple[set[int], dict[str, set[int]]]:
    """Reachable node indices, and broken target -> source node indices."""
    reachable, todo = {0}, [0]
    while todo:
        node = graph.nodes[todo.pop()]
        nexts = [idx for where, idx, _ in node.links if where == "in"]
        if node.kind == "redirect":
            nexts = [node.target]
        for nxt in nexts:
            if nxt not in reachable:
                reachable.add(nxt)
                todo.append(nxt)
    broken: defaultdict[str, set[int]] = defaultdict(set)
    for source in reachable:
        node = graph.nodes[source]
        if node.kind != "page":
            continue
        for where, idx, _ in node.links:
            if where == "ext":
                if not graph.externals[idx]:
                    broken[f"ext:/e{idx}"].add(source)
            elif _resolves_broken(graph, idx):
                broken[f"in:/n{idx}"].add(source)
    return reachable, dict(broken)


def _resolves_broken(graph: Graph, idx: int) -> bool:
    seen = {idx}
    while graph.nodes[idx].kind == "redirect":
        idx = graph.nodes[idx].target
        if idx in seen:
            return True  # a loop (or a redirect to itself)
        seen.add(idx)
    return graph.nodes[idx].kind == "missing"


async def scenario(graph: Graph, db: str, concurrency: int) -> None:
    async with SiteServer({}) as main, SiteServer({}, host="127.0.0.2") as ext:
        build_sites(graph, main, ext)
        data = await crawl(
            db, [main.url("/n0")], max_concurrency=concurrency, host_concurrency=concurrency
        )
        reachable, broken = expected(graph)

        fetched = main.paths_requested("GET")
        assert fetched.pop("/robots.txt") == 1
        assert set(fetched) == {f"/n{i}" for i in reachable}
        assert all(count == 1 for count in fetched.values()), fetched
        assert not main.paths_requested("HEAD")
        # Out of scope, a GET only confirms a HEAD 404 (its body is not parsed).
        missing = {f"/e{j}" for j, ok in enumerate(graph.externals) if not ok}
        ext_gets = ext.paths_requested("GET")
        assert set(ext_gets) <= missing, "an out-of-scope page was fetched to be parsed"
        assert "/never-parsed" not in ext.paths_requested()
        assert all(count == 1 for count in ext_gets.values())
        assert all(count == 1 for count in ext.paths_requested("HEAD").values())

        def label(url: str) -> str:
            if url.startswith(ext.origin):
                return "ext:" + url[len(ext.origin) :]
            return "in:" + url[len(main.origin) :]

        reported = {
            label(b.url): {int(label(s)[len("in:/n") :]) for s in b.sources} for b in data.broken
        }
        assert reported == broken
        assert data.crawl.state == "finished"


# any_db is function-scoped, so every example of a backend crawls in the same
# database: that is intended (each example is a new crawl there), not a leak.
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(graph=graphs(), concurrency=st.sampled_from([1, 4, 32]))
def test_random_site_graphs(graph: Graph, concurrency: int, any_db: str) -> None:
    asyncio.run(scenario(graph, any_db, concurrency))
