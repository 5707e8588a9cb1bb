#!/usr/bin/env bash
# Create .venv and install limno (editable) with its dev and Spark dependencies,
# then fetch the Spark JVM jars and a Kafka broker's (scripts/jars.sh, itself idempotent).
# Idempotent: skips the install when pyproject.toml has not changed since the last one.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-}
if [[ -z "$PYTHON" ]]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then PYTHON=$candidate; break; fi
  done
fi
[[ -n "$PYTHON" ]] || { echo "error: no python3.11 or python3 on PATH" >&2; exit 1; }

if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv with $PYTHON" >&2
  "$PYTHON" -m venv .venv
fi

# the web UI's browser tests (tests/ui) drive Debian's chromium through Playwright
install_chromium() {
  if command -v chromium >/dev/null 2>&1; then return 0; fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: warning: no chromium and no apt-get: install chromium for the browser tests" >&2
    return 0
  fi
  local sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo -n"; fi
  echo "setup: installing chromium (apt-get) for the web UI's browser tests" >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium \
    >/dev/null || {
    $sudo apt-get update -q >/dev/null &&
      $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium \
        >/dev/null
  }
}
install_chromium

stamp=.venv/.limno-setup
want=$(cat pyproject.toml scripts/setup.sh scripts/jars.sh scripts/jars/pom.xml | sha256sum | cut -d' ' -f1)
# bytecode for limno's own modules: a CLI command imports ~60 of them, and compiling
# them at every start (PYTHONDONTWRITEBYTECODE=1 forbids caching) costs more than the work
compile_limno() { .venv/bin/python -m compileall -q src/limno >/dev/null; }
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  compile_limno
  bash scripts/jars.sh
  bash scripts/jars.sh kafka
  exit 0
fi
echo "setup: installing limno and its dependencies into .venv" >&2
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[dev,spark]"
compile_limno
bash scripts/jars.sh
bash scripts/jars.sh kafka
echo "$want" > "$stamp"
echo "setup: done" >&2
