# SPDX-License-Identifier: MIT
# Sourced by the CLI test scripts. expect_error PATTERN ARGS...: `$peat ARGS...` must exit 1 and
# print one line, 'peat: error: ...PATTERN...'. When $absent names a file, it is removed first and
# must still be missing after (a refused command writes nothing).
expect_error() {
  local pattern=$1; shift
  [[ -z ${absent:-} ]] || rm -f "$absent"
  local err rc
  err=$("$peat" "$@" 2>&1 >/dev/null); rc=$?
  [[ $rc -eq 1 ]] || { echo "exit $rc for: $*"; exit 1; }
  [[ $(printf '%s\n' "$err" | wc -l) -eq 1 && $err == "peat: error: "*$pattern* ]] || { echo "bad error for $*: $err"; exit 1; }
  [[ -z ${absent:-} || ! -e $absent ]] || { echo "an output was written for: $*"; exit 1; }
}
