#!/usr/bin/env bash
# Record the model judge (a registered local model) on the labelled subsets, under the one-model-server lock.
# Usage: flock /tmp/llama.lock bash scripts/record_judge.sh MODEL PORT
set -u
MODEL=${1:-qwen2.5-coder-1.5b}
PORT=${2:-8131}
BENCH=${BENCH:-harness-bench}
$BENCH serve-model "$MODEL" --port "$PORT" > "/tmp/judge-serve-$PORT.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null' EXIT
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$PORT/health" > /dev/null && break
  sleep 2
done
for SET in dev held-out; do
  $BENCH judge-check --answers "evalsets/judge/$SET-model-subset.jsonl" --judge rules --judge model \
    --judge-model "$MODEL" --judge-base-url "http://127.0.0.1:$PORT/v1" --record-mode new_episodes \
    --json "reports/judges/$SET-model-subset.json"
done
