#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Prints where the project virtual environment lives: $PEAT_VENV, or one per set of pins under the
# user's cache (outside the build tree, so a fresh clone reuses it). CMake computes the same path.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -n "${PEAT_VENV:-}" ]]; then echo "$PEAT_VENV"; exit 0; fi
hash=$(sha256sum tools/python-requirements.txt | cut -c1-12)
echo "${XDG_CACHE_HOME:-$HOME/.cache}/peat-workbench/venv-$hash"
