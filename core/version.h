// SPDX-License-Identifier: MIT
#pragma once
#include <string>

namespace peat {
const char* toolVersion();  // project version, e.g. "0.1.0"
const char* gitCommit();    // short commit at build time, "-dirty" if the tree had changes
std::string hdf5Version();  // version of the HDF5 library linked at run time
}  // namespace peat
