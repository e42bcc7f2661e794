#!/usr/bin/env bash
# Do the dependency floors in pyproject.toml really work? Install every dependency
# (with the postgres and service extras) at exactly its lowest allowed version in a
# fresh virtualenv, then run the command and the tests that need no dev extra beyond
# pytest. Usage: .ci/floors.sh [PYTHON]   (slow: downloads the old versions)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${1:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m venv "$work/venv"
bin=$work/venv/bin
"$bin/python" -m pip install --quiet --upgrade pip
# ">=X" becomes "==X" for every requirement of the base and the runtime extras.
"$bin/python" - "$work/floors.txt" <<'PY'
import re, sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
wanted = project["dependencies"] + [
    req for extra in ("postgres", "service") for req in project["optional-dependencies"][extra]
]
pins = []
for req in wanted:
    name, floor = re.match(r"\s*([A-Za-z0-9_.-]+)\s*>=\s*([^,;\s]+)", req).groups()
    marker = req.split(";", 1)[1] if ";" in req else ""
    pins.append(f"{name}=={floor}" + (f"; {marker.strip()}" if marker else ""))
open(sys.argv[1], "w").write("\n".join(pins) + "\n")
print("floors:", ", ".join(pins))
PY
PIP_CONSTRAINT="$work/floors.txt" "$bin/python" -m pip install --quiet '.[postgres,service]'
"$bin/python" -m pip install --quiet pytest pytest-asyncio pytest-timeout hypothesis jsonschema pyyaml trustme
"$bin/python" -m pip list --format=freeze | grep -iE "^(aiohttp|selectolax|pydantic|structlog|rich|yarl|protego|defusedxml|idna|brotli|prometheus.client|uvloop|asyncpg|orjson|markdown.it.py|httptools)=="
"$bin/crawler" --version
"$bin/crawler" crawl --root-dir tests/fixtures/built-site --base-url https://example.org/ \
    --fallback-extensions html --db "$work/floors.db" -n -f json -o "$work/report.json" || test $? -eq 2
"$bin/python" -m pytest -q -p no:cacheprovider tests/test_urls.py tests/test_sitemaps.py \
    tests/test_extract.py tests/test_extract_stream.py tests/test_engine.py tests/test_options.py \
    tests/test_built_site.py tests/test_lychee_habits.py tests/test_cli_exits.py tests/test_link_checking.py \
    tests/test_extract_markdown.py tests/test_markdown_site.py tests/test_http_client.py
echo "floors: ok"
