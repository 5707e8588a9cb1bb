#!/usr/bin/env bash
# Install PostgreSQL from Debian's packages when no server is installed: the CDC chain
# (tests/cdc, `make cdc-demo`) starts one of its own in a temporary directory
# (tests/postgres_support.py). Idempotent and quiet: does nothing when a server exists.
set -euo pipefail
if compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || command -v postgres >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: postgres.sh: no PostgreSQL server and no apt-get: install PostgreSQL (15 or later)" >&2
  exit 1
fi
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo -n"; fi
echo "setup: installing PostgreSQL (apt-get) for the CDC chain" >&2
install() {
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    postgresql >/dev/null
}
install || { $sudo apt-get update -q >/dev/null && install; }
