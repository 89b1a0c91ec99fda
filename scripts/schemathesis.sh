#!/usr/bin/env bash
# Property-based sweep of the coordinator's HTTP API with schemathesis (PyPI), driven by
# the OpenAPI document the server itself serves: generated valid, invalid, malformed and
# unauthenticated requests against a real `lull coordinator serve` on 127.0.0.1, once
# with an admin key and once with an agent's secret. Fails on any 5xx, on a status code,
# content type or body the document does not declare. (The data-acceptance checks are
# left out: the server is deliberately stricter than the schema — lengths, NUL, roles.)
# Usage: scripts/schemathesis.sh [EXAMPLES_PER_OPERATION]   (default 50)
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-50}"
venv="target/schemathesis-venv"
if [ ! -x "$venv/bin/schemathesis" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "schemathesis>=4,<5"
fi
cargo build -q -p lull
bin="${CARGO_TARGET_DIR:-target}/debug/lull"
dir="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
export LULL_DATA_DIR="$dir"
"$bin" coordinator serve --listen "127.0.0.1:$port" >"$dir/out.txt" 2>"$dir/coordinator.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
url="http://127.0.0.1:$port"
for _ in $(seq 1 300); do curl -fs "$url/healthz" >/dev/null && break; sleep 0.1; done
curl -fs "$url/healthz" >/dev/null || { echo "the coordinator did not come up:" >&2; cat "$dir/coordinator.log" >&2; exit 1; }
admin="$(cat "$dir/coordinator-admin.key")"
checks="not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance"
fuzz() {
  "$venv/bin/schemathesis" run "$url/api/openapi.json" -H "Authorization: Bearer $1" \
    --checks "$checks" --max-examples "$n" --generation-deterministic --suppress-health-check all \
    --request-timeout 35  # long-polls on /api/v1/lease may wait up to 30 s by design
}
fuzz "$admin"
# The agent is enrolled after the admin's run, which may remove machines, replace
# enrolments or revoke keys (its stateful phase follows the API's links).
token="$("$bin" coordinator token create 2>/dev/null)"
agent="$(curl -fs -X POST -H 'content-type: application/json' \
  -d "{\"token\":\"$token\",\"owner\":\"fuzz\",\"machine\":\"fuzz-agent\",\"cpus\":2}" "$url/api/v1/enrol" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])')"
fuzz "$agent"
# The server is still up and never answered 5xx.
curl -fs "$url/healthz" >/dev/null
if curl -fs "$url/metrics" | grep -E '^lull_http_requests_total\{.*status="5' ; then
  echo "the coordinator answered 5xx" >&2; exit 1
fi
echo "schemathesis: no 5xx, every answer as documented"
