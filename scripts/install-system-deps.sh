#!/usr/bin/env bash
# Installs the Debian packages the test suite uses (iproute2 for the lab,
# chromium for the report test, slurm + munge for the scheduler test).
# Needs root and apt; elsewhere it says what is missing and the tests skip.
set -u
want=(iproute2 chromium slurmctld slurmd munge)
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null; then
  echo "install-system-deps: not root or no apt-get; missing ${missing[*]} (related tests will skip)" >&2
  exit 0
fi
echo "install-system-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1 || true
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
  || echo "install-system-deps: apt-get install failed for ${missing[*]} (related tests will skip)" >&2
exit 0
