#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The unit tests of the torch-free core and gpu/ under AddressSanitizer and UndefinedBehaviorSanitizer
# (preset asan, build-asan/), leak checking on. The subset, and why: docs/sanitizers.md.
# tools/test.sh runs it after the main suite.
set -euo pipefail
cd "$(dirname "$0")/.."
tests=(tst_fp tst_json tst_util tst_store tst_store_damage tst_analyzer tst_detector gpu_tests)
cmake --preset asan ${PEAT_WERROR:+-DPEAT_WERROR=$PEAT_WERROR} >/dev/null
cmake --build --preset asan --target "${tests[@]}"
ctest --preset asan -R '^(tst_fp|tst_json|tst_util|tst_store|tst_store_damage|tst_analyzer|tst_detector|gpu_conformance_cpu)$'
