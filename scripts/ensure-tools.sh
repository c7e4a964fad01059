#!/usr/bin/env bash
# Make sure the Debian tools obsgen tests against are installed.
#   scripts/ensure-tools.sh promtool amtool prometheus prometheus-alertmanager
# Installs the Debian package that ships each missing tool when running as root (CI, a
# container); otherwise prints the command to run and fails.
set -euo pipefail

declare -A PACKAGE=(
  [promtool]=prometheus
  [prometheus]=prometheus
  [vmalert]=victoria-metrics
  [victoria-metrics]=victoria-metrics
  [prometheus-alertmanager]=prometheus-alertmanager
  [amtool]=prometheus-alertmanager
  [prometheus-node-exporter]=prometheus-node-exporter
)

missing=()
for tool in "$@"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${PACKAGE[$tool]:?unknown tool $tool}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
# de-duplicate, keep order
pkgs=$(printf '%s\n' "${missing[@]}" | awk '!seen[$0]++' | tr '\n' ' ')

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "missing: $* needs Debian packages: $pkgs- install them with: sudo apt-get install -y $pkgs" >&2
  exit 1
fi
echo "installing Debian packages: $pkgs"
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
if ! apt-get install -y -qq --no-install-recommends $pkgs >/tmp/obsgen-apt.log 2>&1; then
  apt-get update -qq >/tmp/obsgen-apt-update.log 2>&1
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $pkgs >/tmp/obsgen-apt.log 2>&1 || {
    echo "apt-get install $pkgs failed; see /tmp/obsgen-apt.log" >&2; exit 1; }
fi
for tool in "$@"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool still missing after installing $pkgs" >&2; exit 1; }
done
