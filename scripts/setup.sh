#!/usr/bin/env bash
# Installs gilspy's build and test dependencies from Debian's packages (idempotent), then configures and
# builds. Usage: [BUILD_TYPE=...] [BUILD_TARGETS="t1 t2"] scripts/setup.sh [--no-build] [--asan] [--chromium]
# --chromium: also Debian's chromium, for scripts/devtools_screenshot.py (docs only, no test needs it); no build.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake pkg-config libelf-dev libdw-dev libdwarf-dev libboost-dev libboost-system-dev zlib1g-dev
      nlohmann-json3-dev doctest-dev libcli11-dev libfmt-dev gdb python3.11 util-linux bpftrace nodejs
      patchelf clang-format)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Debian's nodejs comes without npm (its own package); NodeSource's nodejs ships npm and conflicts with it.
command -v npm >/dev/null || missing+=(npm)
if [ "${1:-}" = --chromium ] && ! command -v chromium >/dev/null; then missing+=(chromium fonts-dejavu-core); fi
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# record --exact defines its uprobes in tracefs, and bench/ (uprobe ground truth) has bpftrace detach its
# uprobes through it: mount it if the kernel did not.
if [ -d /sys/kernel/tracing ] && ! mountpoint -q /sys/kernel/tracing; then
  if [ "$(id -u)" = 0 ]; then MOUNT=(mount); else MOUNT=(sudo -n mount); fi
  "${MOUNT[@]}" -t tracefs nodev /sys/kernel/tracing 2>/dev/null ||
    echo "setup: could not mount tracefs on /sys/kernel/tracing (bench/ uprobes still attach, but warn on detach)" >&2
fi

# tests/viewer: the DevTools trace engine for the real-viewer test, exactly as package-lock.json pins it
# (npm ci); reinstalled only when the lock file changes.
lock_sum=$(sha256sum tests/viewer/package-lock.json | cut -d' ' -f1)
if [ "$(cat tests/viewer/node_modules/.gilspy-lock-sha256 2>/dev/null)" != "$lock_sum" ]; then
  echo "setup: npm ci in tests/viewer" >&2
  (cd tests/viewer && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  echo "$lock_sum" > tests/viewer/node_modules/.gilspy-lock-sha256
fi

# Unity builds (16 sources per compiler run): the big headers (nlohmann/json, fmt, CLI11, Asio, doctest) are
# parsed once per batch instead of once per file, which halves a clean build on two cores. UNITY=OFF builds
# file by file (quicker when one file changes again and again).
unity=(-DCMAKE_UNITY_BUILD="${UNITY:-ON}" -DCMAKE_UNITY_BUILD_BATCH_SIZE=16)
case "${1:-}" in
  --no-build | --chromium) exit 0 ;;
  --asan)
    # -g1: line tables, all a sanitizer report needs, for a fifth less compile time than -g.
    cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DGILSPY_SANITIZE=ON \
      -DGILSPY_WERROR=ON "${unity[@]}" >/dev/null
    cmake --build build-asan -j"$(nproc)" --target gilspy_unit_tests gilspy_fuzz_convert gilspy
    exit 0 ;;
esac
# -g1 (line tables: backtraces and perf still name lines) instead of -g: the build is 10-30 % faster per file.
cmake -S . -B build -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DGILSPY_WERROR=ON "${unity[@]}" >/dev/null
# BUILD_TARGETS: only these (scripts/test.sh: what the end-to-end tests run); default everything.
# shellcheck disable=SC2086
cmake --build build -j"$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
