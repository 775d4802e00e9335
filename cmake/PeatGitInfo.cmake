# SPDX-License-Identifier: MIT
# Regenerates gitinfo.cpp at build time so the recorded commit follows the checkout,
# but rewrites it only when the text changes, so nothing recompiles needlessly.
set(PEAT_GITINFO_CPP "${PROJECT_BINARY_DIR}/generated/gitinfo.cpp")
add_custom_target(peat_gitinfo
  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${PEAT_GITINFO_CPP}
          -DVERSION=${PROJECT_VERSION} -P ${PROJECT_SOURCE_DIR}/cmake/WriteGitInfo.cmake
  BYPRODUCTS ${PEAT_GITINFO_CPP}
  COMMENT "Recording git commit"
  VERBATIM)
