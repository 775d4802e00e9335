# SPDX-License-Identifier: MIT
# Warnings live in an INTERFACE target that our own targets link privately.
add_library(peat_warnings INTERFACE)
target_compile_options(peat_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${PEAT_WERROR}>>:-Werror>)
