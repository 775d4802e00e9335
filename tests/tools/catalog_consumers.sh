#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One catalog (issue 43 item 7): the model zoo and the kernels are typed once, in core/catalog, and
# every consumer lists exactly what it holds. Here: `peat models` (and its --json), `peat profile
# --help`'s model list, `peat kernels`, and the shell completion of --model and --kernel, run in
# bash as a Tab would run it (bash-completion's _init_completion stood in for by its documented
# effect: cur, prev, words, cword). The run panel's lists: tst_runpanel; SAVE's graphs and the
# LibTorch zoo against the catalog's flags: tst_save_ranges.
#   usage: catalog_consumers.sh PEAT COMPLETION
set -u
peat=$1 completion=$(readlink -f "$2")
fail() { echo "$*"; exit 1; }
models=$("$peat" models) || fail "peat models failed"
[[ -n $models ]] || fail "peat models lists nothing"
json=$("$peat" models --json | python3 -c 'import json,sys; print("\n".join(m["name"] for m in json.load(sys.stdin)))')
[[ $json == "$models" ]] || fail "peat models --json lists $json, peat models $models"
help=$("$peat" profile --help | grep -o 'Model: [^,]*\(, [^,]*\)*, or a TorchScript' | sed 's/^Model: //; s/, or a TorchScript//; s/, /\n/g')
[[ $help == "$models" ]] || fail "peat profile --help lists models '$help', the catalog '$models'"
kernels=$("$peat" kernels | awk '{print $1}')
[[ $(echo "$kernels" | wc -l) -gt 20 ]] || fail "peat kernels lists '$kernels'"
# the shell completion, as bash runs it on Tab, in an empty folder (it completes file names too)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/bin"
ln -s "$(readlink -f "$peat")" "$scratch/bin/peat"
complete_words() {  # WORDS...: what Tab offers after them
  (mkdir -p "$scratch/empty" && cd "$scratch/empty" && PATH="$scratch/bin:$PATH" bash -c '
    _init_completion() { words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; cur=${words[cword]}; prev=${words[cword-1]}; }
    _filedir() { :; }
    source "$1"; shift
    COMP_WORDS=("$@" ""); COMP_CWORD=$#
    _peat
    printf "%s\n" "${COMPREPLY[@]}"' _ "$completion" "$@")
}
commands=$("$peat" --help | awk '/^Subcommands:/ {on = 1; next} on && /^  [a-z]/ {print $1}' | sort)
[[ $(echo "$commands" | wc -l) -gt 10 ]] || fail "peat --help lists commands '$commands'"
offered=$(complete_words peat | grep -v '^--' | sort)
[[ $offered == "$commands" ]] || fail "Tab after peat offers '$offered', peat --help '$commands'"
offered=$(complete_words peat profile --model | sort)
[[ $offered == "$(echo "$models" | sort)" ]] || fail "Tab after --model offers '$offered', the catalog '$models'"
offered=$(complete_words peat playback --kernel | sort)
[[ $offered == "$(echo "$kernels" | sort)" ]] || fail "Tab after --kernel offers '$offered', peat kernels '$kernels'"
echo "ok: $(echo "$commands" | wc -l) commands, $(echo "$models" | wc -l) models and $(echo "$kernels" | wc -l) kernels, the same in peat models, --help, peat kernels and the completion"
