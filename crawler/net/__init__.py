"""Network adapters: fetching, name resolution under the address guard, robots.txt,
sitemaps, cookies and local files. Everything that sends a request lives here."""
