// SPDX-License-Identifier: MIT
// HDF5's deflate filter, replaced by one that inflates a chunk only up to a bound (kMaxChunkBytes). libhdf5's own
// doubles its output buffer until the stream ends: an audit's 3 MB stream in a chunk declaring 3,840
// bytes took 3.5 GB in `info --verify`, `analyze` and `playback` before the checksum refused it.
// The format is zlib's either way (files written here read in h5py and h5dump, and theirs here).
#include "core/store/h5_detail.h"

#include <dlfcn.h>
#include <hdf5.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>

namespace peat::h5::detail {

namespace {

// Compressing: the chunk as one zlib stream at the dataset's level (cd_values[0]). Inflating: into
// a buffer that grows by doubling up to kMaxChunkBytes; a stream that inflates past it fails the
// read (libhdf5 then reports the filter's failure for that dataset).
std::size_t boundedDeflate(unsigned flags, std::size_t count, const unsigned values[], std::size_t bytes,
                           std::size_t* size, void** buffer) {
  if (flags & H5Z_FLAG_REVERSE) {
    std::size_t room = std::min<std::size_t>(std::max<std::size_t>(*size, 2 * bytes), kMaxChunkBytes);
    auto* out = static_cast<unsigned char*>(std::malloc(room));
    if (!out) return 0;
    z_stream z{};
    z.next_in = static_cast<Bytef*>(*buffer);
    z.avail_in = uInt(bytes);
    z.next_out = out;
    z.avail_out = uInt(room);
    if (inflateInit(&z) != Z_OK) {
      std::free(out);
      return 0;
    }
    int status = Z_OK;
    bool pastCap = false;
    while (status != Z_STREAM_END) {
      status = inflate(&z, Z_NO_FLUSH);
      if (status == Z_STREAM_END) break;
      if ((status != Z_OK && status != Z_BUF_ERROR) || (status == Z_BUF_ERROR && z.avail_out != 0)) break;  // damaged, or cut short
      if (z.avail_out == 0) {
        if (room >= kMaxChunkBytes) {  // inflates past any chunk a session may declare
          pastCap = true;
          break;
        }
        const std::size_t grown = std::min<std::size_t>(2 * room, kMaxChunkBytes);
        auto* larger = static_cast<unsigned char*>(std::realloc(out, grown));
        if (!larger) break;
        out = larger;
        z.next_out = out + room;
        z.avail_out = uInt(grown - room);
        room = grown;
      }
    }
    inflateEnd(&z);
    if (status != Z_STREAM_END) {
      std::free(out);
      // the innermost message of the failed read (h5::Error names the dataset)
      H5Epush2(H5E_DEFAULT, __FILE__, __func__, __LINE__, H5E_ERR_CLS, H5E_PLINE, H5E_CANTFILTER,
               pastCap ? "a deflated chunk inflates past 64 MiB, more than any chunk may hold"
                                      : "a deflated chunk is damaged");
      return 0;
    }
    std::free(*buffer);
    *buffer = out;
    *size = room;
    return z.total_out;
  }
  const int level = count > 0 && values[0] <= 9 ? int(values[0]) : Z_DEFAULT_COMPRESSION;
  uLongf room = compressBound(uLong(bytes));
  auto* out = static_cast<unsigned char*>(std::malloc(room));
  if (!out) return 0;
  if (compress2(out, &room, static_cast<const Bytef*>(*buffer), uLong(bytes), level) != Z_OK) {
    std::free(out);
    return 0;
  }
  std::free(*buffer);
  *buffer = out;
  *size = room;
  return room;
}

}  // namespace

// libhdf5's public H5Zregister refuses the predefined filters' numbers (below 256); its internal
// H5Z_register, which the shared library exports, replaces an entry. Looked up at run time: a
// libhdf5 without it keeps its own deflate (and the probe's chunk-size limit still holds).
void registerBoundedDeflate() {
  static const bool registered = [] {
    static const H5Z_class2_t filter = {H5Z_CLASS_T_VERS, H5Z_FILTER_DEFLATE, 1, 1, "deflate", nullptr, nullptr,
                                        boundedDeflate};
    using Register = herr_t (*)(const H5Z_class2_t*);
    const auto replace = reinterpret_cast<Register>(dlsym(RTLD_DEFAULT, "H5Z_register"));
    return H5open() >= 0 && replace && replace(&filter) >= 0;
  }();
  (void)registered;
}

}  // namespace peat::h5::detail
