#!/usr/bin/env bash
# Sets up, builds (warnings are errors) and runs every test: the unit tests and the convert fuzzer under
# ASan/UBSan, then the end-to-end tests against every pyenv interpreter 3.8+ and Debian's 3.11, 3.14, 3.15.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=0
phase() { echo "== $1 (at ${SECONDS} s)"; }
# The unit tests run once, under the sanitizers (below): the plain build makes what the other tests run.
BUILD_TARGETS="gilspy gilspy_trace_check convert_without_sampler" scripts/setup.sh
# Debian unstable's python3.14/3.15 with their own glibc (cached); without network they are reported missing.
scripts/fetch_debian_pythons.sh || echo "test: Debian unstable's interpreters could not be fetched (see above)" >&2
phase "formatting: every C++ file as .clang-format has it (clang-format --dry-run -Werror)"
git ls-files '*.cpp' '*.hpp' | xargs clang-format --dry-run -Werror
phase "the ASan/UBSan build"
scripts/setup.sh --asan
phase "unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 build-asan/tests/gilspy_unit_tests
phase "convert under the mutation fuzzer (its corpus, then 15 s), AddressSanitizer + UndefinedBehaviorSanitizer"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  build-asan/tests/gilspy_fuzz_convert --seconds 15 --corpus tests/fuzz/corpus tests/data/small.raw.json
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  build-asan/tests/gilspy_fuzz_convert --seconds 5 tests/data/stacks.raw.json
phase "targets that corrupt their own interpreter, recorded by the ASan/UBSan gilspy"
# halt_on_error: a UBSan report ends gilspy with an error status, which the scenario fails on.
# 77: the interpreter is missing, which the scenario names. 3.12 forges native_thread_id, 3.8 the pthread_t.
sanitized_e2e() {
  GILSPY_E2E_SANITIZED=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    python3 tests/e2e/run_e2e.py "$1" "$2" --gilspy build-asan/cli/gilspy \
    --trace-check build/tests/gilspy_trace_check || [ $? -eq 77 ]
}
sanitized_e2e hostile_gil pyenv-3.12
sanitized_e2e hostile_tids pyenv-3.12
sanitized_e2e hostile_tids pyenv-3.8
phase "all other tests (end-to-end, viewer, bench smoke), one at a time: the end-to-end tests measure timing"
# unit and fuzz_convert* are the unit tests and fuzzers without sanitizers: run above under ASan already.
ctest --test-dir build --output-on-failure --timeout 600 -E "^fuzz_convert|^unit$"
phase "done"
