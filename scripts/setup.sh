#!/usr/bin/env bash
# Installs gilspy's build and test dependencies from Debian's packages (idempotent), then configures and
# builds. Usage: scripts/setup.sh [--no-build] [--asan]
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake pkg-config libelf-dev libdwarf-dev libboost-dev libboost-system-dev
      nlohmann-json3-dev doctest-dev libcli11-dev libfmt-dev gdb)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "${1:-}" = "--no-build" ] && exit 0
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
cmake -S . -B build -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DGILSPY_WERROR=ON >/dev/null
cmake --build build -j"$(nproc)"
