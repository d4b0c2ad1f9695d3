#!/usr/bin/env bash
# Install the Debian 12 packages offloadfs needs to build, test and run,
# only those that are missing (quick when everything is there).
set -euo pipefail
pkgs=(build-essential meson ninja-build pkg-config libfuse3-dev fuse3 libsqlite3-dev
      sqlite3 libxxhash-dev xxhash liburing-dev check attr python3 util-linux fio gnuplot-nox
      postgresql-15 libpq-dev)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
