#!/usr/bin/env bash
# Run a test program against a throwaway PostgreSQL server of its own
# (scripts/pg), stopped and removed whatever happens: OFS_TEST_PG_URI names it.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d /tmp/ofs-pg.XXXXXX)
cleanup() { "$here/scripts/pg" stop "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
OFS_TEST_PG_URI=$("$here/scripts/pg" start "$dir")
export OFS_TEST_PG_URI
"$@"
