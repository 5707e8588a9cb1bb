#!/usr/bin/env bash
# The README's quickstart, run for real on a fresh local lake in ./quickstart-lake.
# Each command is echoed with a "$ " prompt so the output reads as a transcript.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
export LIMNO_LAKE="$PWD/quickstart-lake"
export XDG_CONFIG_HOME="$PWD/quickstart-lake/.config"
rm -rf "$LIMNO_LAKE"

run() { printf '$ %s\n' "$*"; eval "$@" 2>&1; echo; }

run limno init
run limno create logs -k ts
run limno load -p logs -m "'first batch'" examples/logs-1.ndjson
run limno load -p logs -m "'second batch'" examples/logs-2.csv
run limno -f table scan -p logs
run limno -f table scan -p logs --from 3 --to 6 --order desc
run limno -f table get -p logs 4
run limno -f table query "'SELECT level, count(*) AS n FROM logs GROUP BY level ORDER BY n DESC, level'"
run limno -f table log -p logs -n 2
run limno -f table scan -p logs@main~1
run limno delete -p logs --where "\"level = 'error'\""
run limno -f table query "'SELECT ts, level, msg FROM \"logs@main\" ORDER BY ts'"
run limno -f table query "'SELECT id, rows, min_key, max_key FROM \"logs:objects\"'"
run limno verify

echo "# --- branching ---"
run limno branch -p logs dev
run limno load -p logs@dev -m "'backfill'" examples/logs-3.ndjson
run limno delete -p logs --where "\"level = 'warn'\""
run limno -f table diff -p logs --three-dot dev
run limno merge -p logs dev -m "'merge the backfill'"
run limno -f table log -p logs -n 1
run limno -f table query "'SELECT ts, level, msg FROM logs ORDER BY ts'"
run limno tag -p logs v1
run limno branch -p logs -d dev
run limno ls logs -f table
run limno verify

echo "# --- maintenance ---"
run limno create clicks -k page --iterator "'sum(clicks),max(last_seen)'" --split-threshold 4 --compaction overlap
run limno load -p clicks examples/clicks-1.csv
run limno load -p clicks examples/clicks-2.csv
run limno -f table scan -p clicks
run limno manage --once -p clicks --grace 0
run limno -f table query "'SELECT id, lo, hi, leaf, rows, objects FROM \"clicks:partitions\"'"
run limno compact -p clicks
run limno -f table status clicks -n 3
run limno -f table scan -p clicks
