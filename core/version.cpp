// SPDX-License-Identifier: MIT
#include "core/version.h"

#include <hdf5.h>

namespace peat {
std::string hdf5Version() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}
}  // namespace peat
