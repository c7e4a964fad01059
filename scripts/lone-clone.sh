#!/usr/bin/env bash
# Run commands in a fresh clone of this repository, in an empty temporary folder with
# nothing beside it, as a user's clone would be:
#   scripts/lone-clone.sh 'make test' 'make e2e'
# Each argument is one command, run in order in the same clone; the first that fails
# stops the run with its exit code. The clone is of the committed HEAD (uncommitted changes
# are not in it) and is removed afterwards. A test, Makefile target or CI step that needs
# a file from outside the repository fails here.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 'COMMAND' ['COMMAND' ...]" >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
  echo "lone-clone: note: uncommitted changes in $src are not in the clone" >&2
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/obsgen-lone-clone.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
git clone --quiet --no-hardlinks "$src" "$tmp/obsgen"
cd "$tmp/obsgen"
echo "lone-clone: $(git log -1 --format='%h %s') in $PWD (beside it: $(ls -A "$tmp" | tr '\n' ' '))"
for cmd in "$@"; do
  echo "lone-clone: $cmd"
  bash -c "$cmd"
done
