#!/usr/bin/env bash
# Run named stages in order, each announced with its number and timed:
#   scripts/stages.sh "name" "command" ["name" "command" ...]
# Stops at the first stage that fails, naming it; prints the total at the end.
set -uo pipefail
total=$(($# / 2))
n=0
start=$SECONDS
while [ $# -ge 2 ]; do
  name=$1 cmd=$2
  shift 2
  n=$((n + 1))
  echo "== [$n/$total] $name"
  t0=$SECONDS
  if ! bash -c "$cmd"; then
    echo "== [$n/$total] $name: FAILED after $((SECONDS - t0)) s" >&2
    exit 1
  fi
  echo "== [$n/$total] $name: ok in $((SECONDS - t0)) s"
done
echo "== all $total stages passed in $((SECONDS - start)) s"
