"""Headless Chromium for ``--render``: pages whose links are written by JavaScript.

A small Chrome DevTools Protocol client on aiohttp's websocket (no other
dependency; chosen over Playwright by measurement, see bench/RESULTS.md):

- ``cdp``: one websocket, commands and their answers, events per session;
- ``process``: finding, starting and killing the browser (its own process
  group, and killed with the crawler even on ``kill -9``);
- ``page``: loading one page with every request it makes answered by the
  crawl's own fetcher (same guard, politeness, headers, cookies), until it
  settles, and taking its DOM;
- ``renderer``: the bounded pool of pages, browser restarts (every N pages,
  over an RSS limit, after a crash or a hang) and the one retry.
"""
