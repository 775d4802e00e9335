#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sets up (Debian packages), builds and runs the whole test suite. The README's test command.
# PEAT_WERROR=ON turns warnings into errors (CI sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake --preset default ${PEAT_WERROR:+-DPEAT_WERROR=$PEAT_WERROR}
cmake --build --preset default
ctest --preset default
# the core's unit tests again, under ASan and UBSan (docs/sanitizers.md)
tools/sanitize.sh
