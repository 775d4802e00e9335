// SPDX-License-Identifier: MIT
#pragma once
// Private to core/store's HDF5 layer (h5.cpp, h5_table.cpp, h5_deflate.cpp): error checks and types they share.
#include <hdf5.h>

#include <cstddef>
#include <string>

#include "core/store/h5.h"

namespace peat::h5::detail {

// Throws Error naming `call`, `path` and the innermost message of HDF5's error stack.
[[noreturn]] void fail(const char* call, const std::string& path);
hid_t checkId(hid_t id, const char* call, const std::string& path);
void check(herr_t rc, const char* call, const std::string& path);
// A variable-length UTF-8 string type.
Handle stringType();

// The most bytes a filtered chunk may declare (the probe refuses more) and inflate to: peat writes
// chunks of at most 65,536 elements, h5py of about 1 MiB.
constexpr std::size_t kMaxChunkBytes = std::size_t(64) << 20;
// Replaces libhdf5's deflate filter with one that inflates no chunk past kMaxChunkBytes (h5_deflate.cpp).
void registerBoundedDeflate();

}  // namespace peat::h5::detail

namespace peat::h5 {
// the two files of the layer use them unqualified
using detail::check;
using detail::checkId;
using detail::fail;
using detail::stringType;
}  // namespace peat::h5
