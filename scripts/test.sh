#!/usr/bin/env bash
# Sets up, builds (warnings are errors) and runs every test: unit tests and the convert fuzzer (also under
# ASan/UBSan) and the end-to-end tests against every pyenv interpreter 3.8+ and Debian's python3.11.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Debian unstable's python3.14/3.15 with their own glibc (cached); without network they are reported missing.
scripts/fetch_debian_pythons.sh || echo "test: Debian unstable's interpreters could not be fetched (see above)" >&2
echo "== unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
scripts/setup.sh --asan
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 build-asan/tests/gilspy_unit_tests
echo "== convert under the mutation fuzzer, AddressSanitizer + UndefinedBehaviorSanitizer (15 s)"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  build-asan/tests/gilspy_fuzz_convert --seconds 15 tests/data/small.raw.json
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  build-asan/tests/gilspy_fuzz_convert --seconds 5 tests/data/stacks.raw.json
echo "== all tests (unit + end-to-end), one at a time: the end-to-end tests measure timing on a small machine"
# The fuzz_convert* entries are the same fuzzers without sanitizers: run above under ASan already.
ctest --test-dir build --output-on-failure --timeout 600 -E "^fuzz_convert"
