#!/usr/bin/env bash
# A new user's quick check, as docs/serve.md writes it: `kedro run --env ci`, promote, serve the
# champion with `mlflow models serve`, send the model's stored example request with curl. Runs in a
# throw-away copy of this checkout (tracked and untracked, not ignored, files: no data, no stores),
# with the Python environment that is active; the server is stopped at the end. About 2-3 minutes
# on 2 cores (the ci run). Not part of the test suite: the ci run alone is longer than a test may take.
#
#   bash benchmarks/serve_quick_check.sh [work dir (default: a new temporary one)] [port (default 5001)]
set -euo pipefail
checkout="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
port="${2:-5001}"
mkdir -p "$work"
(cd "$checkout" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work")
cd "$work"
export KEDRO_DISABLE_TELEMETRY=1 KEDRO_LOGGING_CONFIG=conf/logging.yml
store=sqlite:///data/ci/mlflow.db
started=$(date +%s)
kedro run --env ci > kedro_run.log 2>&1
kedro run --env ci --pipelines promote > promote.log 2>&1
echo "kedro run --env ci + promote: $(( $(date +%s) - started )) s; $(grep -o 'promote: .*' promote.log)"
# its own session: the server and its uvicorn child are one process group, stopped together at the end
MLFLOW_TRACKING_URI=$store setsid mlflow models serve -m "models:/trading_rl_sac_icm@champion" --env-manager local --port "$port" > serve.log 2>&1 &
server=$!
trap 'kill -- -$server 2>/dev/null || true' EXIT
MLFLOW_TRACKING_URI=$store mlflow artifacts download -u "models:/trading_rl_sac_icm@champion/serving_input_example.json" -d . > /dev/null
until curl -sf "http://127.0.0.1:$port/ping" > /dev/null; do
    kill -0 $server 2>/dev/null || { tail -20 serve.log; exit 1; }
    sleep 1
done
curl -s -X POST "http://127.0.0.1:$port/invocations" -H "Content-Type: application/json" -d @serving_input_example.json > response.json
python - <<'EOF'
import glob
import json

import pandas as pd

(response,) = json.load(open("response.json"))["predictions"]
print(json.dumps(response, indent=1))
assert response["signal"]["action"] in {"HOLD", "BUY", "SELL"} and response["feature_params_digest"].startswith("sha256:")
# The example is the env's first decision of the validation split: the ci run's evaluation rollout
# (the PyTorch policy in the env) has that step first. ONNX vs PyTorch: the export's 1e-5.
(rollout,) = glob.glob("data/ci/08_reporting/sac_icm_rollout.parquet/*/sac_icm_rollout.parquet")
first = pd.read_parquet(rollout).iloc[0]
assert abs(response["raw_action"] - first["action_raw"]) <= 1e-5, (response["raw_action"], first["action_raw"])
assert response["policy"]["kind"] == first["action_type"], (response["policy"]["kind"], first["action_type"])
print(
    f"quick check passed: the champion answered the documented request as the env decided the same bar "
    f"({response['timestamp']}: raw action {response['raw_action']:.6f} vs {first['action_raw']:.6f}, "
    f"{response['policy']['kind']})"
)
EOF
echo "work dir: $work (decision log: $work/trading_rl_decisions.jsonl)"
