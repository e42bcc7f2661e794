#!/usr/bin/env bash
# Start the machine's PostgreSQL when it is not running, and wait until it answers.
# The PostgreSQL tests (tests/test_postgres*.py) use it at 127.0.0.1:5432 with
# trust auth; under CI they fail rather than skip when it is missing.
set -euo pipefail

WAIT_S=${PG_WAIT_S:-60}

if pg_isready -q -h 127.0.0.1 -p 5432; then
    exit 0
fi
if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ ! -d /etc/postgresql ]; then
    echo ".ci/postgres.sh: PostgreSQL is not installed (apt-get install postgresql)" >&2
    exit 1
fi
version=$(ls /etc/postgresql | sort -V | tail -n 1)
echo ".ci/postgres.sh: starting PostgreSQL $version"
pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
for _ in $(seq "$WAIT_S"); do
    if pg_isready -q -h 127.0.0.1 -p 5432; then
        echo ".ci/postgres.sh: PostgreSQL is accepting connections"
        exit 0
    fi
    sleep 1
done
echo ".ci/postgres.sh: PostgreSQL did not answer within ${WAIT_S} s" >&2
exit 1
