"""The crawl loop (lease, fetch, extract, scope, complete), its parse helpers,
the runner that sets a crawl up, and extra worker processes."""
