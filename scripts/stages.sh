#!/usr/bin/env bash
# Run named stages in order, each announced with its number and timed:
#   scripts/stages.sh "name" "command" ["name" "command" ...]
# A name that starts with "+" runs side by side with the stages after it, up to and
# including the next name without "+" (on a machine with two cores or more: otherwise one
# after the other). Their output is held and printed whole as each ends, so their lines
# do not interleave.
# Stops at the first stage (or side-by-side set) that fails, naming it; prints the total.
set -uo pipefail
total=$(($# / 2))
n=0
start=$SECONDS
cores=$(nproc 2>/dev/null || echo 1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pids=() names=() t0s=()

finish() {  # wait for the side-by-side stages; report each; fail if any failed
  local failed=0 i rc
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; rc=$?
    cat "$tmp/${pids[$i]}.out"
    if [ "$rc" -ne 0 ]; then
      echo "== ${names[$i]}: FAILED after $(( $(cat "$tmp/${pids[$i]}.end") - ${t0s[$i]} )) s" >&2
      failed=1
    else
      echo "== ${names[$i]}: ok in $(( $(cat "$tmp/${pids[$i]}.end") - ${t0s[$i]} )) s"
    fi
  done
  pids=() names=() t0s=()
  return $failed
}

while [ $# -ge 2 ]; do
  name=$1 cmd=$2
  shift 2
  n=$((n + 1))
  side=0
  case $name in +*) name=${name#+}; side=1 ;; esac
  if [ ${#pids[@]} -gt 0 ] || { [ $side -eq 1 ] && [ "$cores" -ge 2 ]; }; then
    echo "== [$n/$total] $name (side by side)"
    t0=$SECONDS
    ( me=$BASHPID; bash -c "$cmd" >"$tmp/$me.out" 2>&1; rc=$?; echo "$SECONDS" >"$tmp/$me.end"; exit $rc ) &
    pids+=($!) names+=("[$n/$total] $name") t0s+=("$t0")
    if [ $side -eq 0 ]; then finish || exit 1; fi
    continue
  fi
  echo "== [$n/$total] $name"
  t0=$SECONDS
  if ! bash -c "$cmd"; then
    echo "== [$n/$total] $name: FAILED after $((SECONDS - t0)) s" >&2
    exit 1
  fi
  echo "== [$n/$total] $name: ok in $((SECONDS - t0)) s"
done
[ ${#pids[@]} -gt 0 ] && { finish || exit 1; }
echo "== all $total stages passed in $((SECONDS - start)) s"
