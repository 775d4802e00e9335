#!/bin/sh
# SPDX-License-Identifier: MIT
# The docs say only what the code bears: every repository path that README.md, CONTRIBUTING.md,
# docs/*.md and the CMakeLists' comments cite (a file under app/, core/, views/, tests/, tools/,
# docs/, gpu/, python/, packaging/, cmake/, data/ or base/) exists; paths relative to core/ (as core's
# own CMakeLists and docs/architecture.md write them) are looked up there too. Placeholders (NAME,
# cmd_x) are skipped.   tools/check-doc-paths.sh [REPO]   (ctest: docs_paths)
set -eu
cd "${1:-$(dirname "$0")/..}"
missing=0
checked=0
for src in README.md CONTRIBUTING.md docs/*.md CMakeLists.txt */CMakeLists.txt; do
  [ -f "$src" ] || continue
  # in CMakeLists, only the comments cite paths (the sources they list are checked by the build)
  if [ "${src##*/}" = CMakeLists.txt ]; then text=$(grep -E '^[[:space:]]*#' "$src" || true); else text=$(cat "$src"); fi
  for path in $(printf '%s\n' "$text" |
    grep -oE '(^|[^A-Za-z0-9_./-])(app|core|views|tests|tools|docs|gpu|python|packaging|cmake|data|base)/[A-Za-z0-9_./-]*[A-Za-z0-9_]\.(cpp|h|hpp|cu|md|sh|py|cmake|json|txt|h5|onnx|npy|toml|in)([^A-Za-z0-9_]|$)' |
    sed -E 's/^[^A-Za-z]//; s/[^A-Za-z0-9_]$//' | sort -u); do
    case "$path" in *NAME*|*cmd_x*) continue ;; esac
    checked=$((checked + 1))
    [ -e "$path" ] || [ -e "core/$path" ] || { echo "$src cites $path, which does not exist"; missing=$((missing + 1)); }
  done
done
echo "$checked cited paths checked, $missing missing"
[ "$missing" -eq 0 ]
