#!/usr/bin/env bash
# Fetches Debian unstable's python3.14 and python3.15 (with their stdlib and their own glibc) into a private
# folder, so the end-to-end tests run gilspy against real distribution builds: static libpython, stripped,
# a newer glibc than this machine's. Idempotent and cached: a folder that is already complete is left alone.
#
# The system's apt state is never touched: a temporary source list, private lists/cache directories (apt's
# -o Dir::... options), `apt-get download` (no install), `dpkg-deb -x` into the private folder. The
# interpreters need their glibc (newer than Debian 12's 2.36): the extracted copy of each interpreter gets
# that glibc's ld.so as its ELF interpreter and the private library folder as its RPATH (patchelf).
#
# Usage: scripts/fetch_debian_pythons.sh [DEST]   (DEST defaults to $GILSPY_DEBIAN_PYTHONS, else
#        ~/.cache/gilspy/debian-unstable). Exit 0 when the interpreters are there, non-zero (with a one-line
#        reason) when they could not be fetched (no network): the e2e tests then report them missing.
set -euo pipefail

DEST=${1:-${GILSPY_DEBIAN_PYTHONS:-${XDG_CACHE_HOME:-$HOME/.cache}/gilspy/debian-unstable}}
MINORS=(3.14 3.15)
MIRROR=${GILSPY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The packages an interpreter needs to start and run the test workloads, plus the glibc it was built for.
# Other shared libraries (zlib, expat, libffi...) come from this machine: a newer glibc runs them.
packages=(libc6)
for m in "${MINORS[@]}"; do packages+=("python$m-minimal" "libpython$m-minimal" "libpython$m-stdlib"); done

complete() {
  [ -f "$DEST/.complete" ] || return 1
  for m in "${MINORS[@]}"; do "$DEST/root/usr/bin/python$m" -c 'pass' 2>/dev/null || return 1; done
}
if complete; then
  echo "fetch_debian_pythons: cached in $DEST" >&2
  exit 0
fi
command -v patchelf >/dev/null || { echo "fetch_debian_pythons: patchelf is missing (scripts/setup.sh installs it)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR unstable main" >"$work/sources.list"
APT_OPTS=(-o "Dir::Etc::sourcelist=$work/sources.list" -o "Dir::Etc::sourceparts=-"
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o "Dir::Cache::pkgcache="
          -o "Dir::Cache::srcpkgcache=" -o "APT::Get::List-Cleanup=0" -o "Debug::NoLocking=1"
          -o "Acquire::Languages=none" -o "APT::Architectures=amd64")
if ! apt-get "${APT_OPTS[@]}" -qq update >"$work/update.log" 2>&1; then
  echo "fetch_debian_pythons: cannot read Debian unstable's package lists from $MIRROR ($(tail -1 "$work/update.log"))" >&2
  exit 1
fi
if ! (cd "$work/debs" && apt-get "${APT_OPTS[@]}" -qq download "${packages[@]}") >"$work/download.log" 2>&1; then
  echo "fetch_debian_pythons: cannot download ${packages[*]} ($(tail -1 "$work/download.log"))" >&2
  exit 1
fi

# Unpack into a fresh folder, then swap it in: a half-built folder is never mistaken for a complete one.
staging="$DEST.staging.$$"
rm -rf "$staging"
mkdir -p "$staging/root"
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$staging/root"; done
libdir=$(dirname "$(find "$staging/root" -name 'libc.so.6' -type f -o -name 'libc.so.6' -type l | head -1)")
loader=$(find "$staging/root" -name 'ld-linux-x86-64.so.2' \( -type f -o -type l \) -path '*x86_64-linux-gnu*' | head -1)
[ -n "$libdir" ] && [ -n "$loader" ] || { echo "fetch_debian_pythons: libc6's package has no libc.so.6 / ld.so" >&2; exit 1; }
loader=$(readlink -f "$loader")
for m in "${MINORS[@]}"; do
  py="$staging/root/usr/bin/python$m"
  [ -x "$py" ] || { echo "fetch_debian_pythons: python$m-minimal has no usr/bin/python$m" >&2; exit 1; }
  # DT_RPATH (not RUNPATH): it also applies to what the interpreter dlopen()s (extension modules' libraries).
  patchelf --set-interpreter "$DEST/root/${loader#"$staging/root/"}" --force-rpath \
    --set-rpath "$DEST/root/${libdir#"$staging/root/"}" "$py"
done
ls "$work"/debs/*.deb | xargs -n1 basename >"$staging/packages.txt"
rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
mv "$staging" "$DEST"
for m in "${MINORS[@]}"; do
  "$DEST/root/usr/bin/python$m" -c 'import sys, threading, json; print(sys.version.split()[0])' >/dev/null ||
    { echo "fetch_debian_pythons: the fetched python$m does not start" >&2; exit 1; }
done
touch "$DEST/.complete"
echo "fetch_debian_pythons: $(tr '\n' ' ' <"$DEST/packages.txt")-> $DEST" >&2
