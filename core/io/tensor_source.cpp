// SPDX-License-Identifier: MIT
#include "core/io/tensor_source.h"

#include "core/util/files.h"
#include "core/util/text.h"

#include <cmath>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/fp/format.h"
#include "core/store/h5.h"
#include "core/store/probe.h"

namespace peat::io {

FloatTensor::FloatTensor(FloatTensor&& o) noexcept { *this = std::move(o); }

FloatTensor& FloatTensor::operator=(FloatTensor&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(map_, mapLength_);
    dtype = std::move(o.dtype);
    origin = std::move(o.origin);
    owned_ = std::move(o.owned_);
    shape_ = std::move(o.shape_);
    size_ = o.size_;
    map_ = o.map_;
    mapLength_ = o.mapLength_;
    data_ = map_ ? o.data_ : owned_.data();
    o.map_ = nullptr;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

FloatTensor::~FloatTensor() {
  if (map_) ::munmap(map_, mapLength_);
}

FloatTensor FloatTensor::owned(std::vector<float> values, std::vector<uint64_t> shape) {
  FloatTensor t;
  t.owned_ = std::move(values);
  t.size_ = t.owned_.size();
  t.data_ = t.owned_.data();
  t.shape_ = std::move(shape);
  return t;
}

FloatTensor FloatTensor::mapped(void* base, std::size_t length, const float* data, uint64_t size,
                                std::vector<uint64_t> shape) {
  FloatTensor t;
  t.map_ = base;
  t.mapLength_ = length;
  t.data_ = data;
  t.size_ = size;
  t.shape_ = std::move(shape);
  return t;
}

namespace {

// Little-endian integers of `et` to fp32, refusing values that fp32 would round.
std::vector<float> integersAsFloats(const unsigned char* p, uint64_t count, const ElementType& et,
                                    const std::string& what) {
  std::vector<float> out(count);
  const bool isSigned = et.name[0] == 'i';
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t raw = 0;
    for (int b = 0; b < et.bytes; ++b) raw |= uint64_t(p[i * uint64_t(et.bytes) + uint64_t(b)]) << (8 * b);
    double v;
    if (isSigned) {
      const int shift = 64 - 8 * et.bytes;
      v = double(int64_t(raw << shift) >> shift);
    } else {
      v = double(raw);
    }
    if (v > 16777216.0 || v < -16777216.0)
      throw SourceError(what + ": " + et.name + " value " + std::to_string(v) + " at index " +
                        std::to_string(i) + " is not exact in float32 (|v| <= 2^24 expected)");
    out[i] = float(v);
  }
  return out;
}

}  // namespace

FloatTensor readNpy(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw SourceError("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw SourceError("'" + path + "' is not a regular file");
  }
  const std::size_t length = std::size_t(st.st_size);
  if (length == 0) {
    ::close(fd);
    throw SourceError("'" + path + "' is empty, not a .npy file");
  }
  void* base = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) throw SourceError("cannot map '" + path + "': " + std::strerror(errno));
  try {
    const auto* bytes = static_cast<const unsigned char*>(base);
    const NpyLayout layout = validateNpy(bytes, length, "'" + path + "'");
    const NpyHeader& h = layout.header;
    const ElementType& et = layout.element;
    const uint64_t count = layout.count;
    FloatTensor t;
    if (et.integer()) {
      t = FloatTensor::owned(integersAsFloats(bytes + h.dataOffset, count, et, "'" + path + "'"), h.shape);
      ::munmap(base, length);
      base = nullptr;
    } else if (et.bytes == 4 && h.dataOffset % alignof(float) == 0) {
      ::madvise(base, length, MADV_SEQUENTIAL | MADV_WILLNEED);
      t = FloatTensor::mapped(base, length, reinterpret_cast<const float*>(bytes + h.dataOffset), count, h.shape);
    } else {
      std::vector<float> values(count);
      if (et.bytes == 4) {
        std::memcpy(values.data(), bytes + h.dataOffset, count * 4);
      } else {
        for (uint64_t i = 0; i < count; ++i) {
          uint16_t bits;
          std::memcpy(&bits, bytes + h.dataOffset + 2 * i, 2);
          values[i] = fp::decode(fp::kFp16, bits);
        }
      }
      ::munmap(base, length);
      base = nullptr;
      t = FloatTensor::owned(std::move(values), h.shape);
    }
    t.dtype = et.name;
    t.origin = path;
    return t;
  } catch (...) {
    if (base) ::munmap(base, length);
    throw;
  }
}

FloatTensor readHdf5Dataset(const std::string& file, const std::string& dataset) {
  if (!h5::looksLikeHdf5(file)) throw SourceError("'" + file + "' is not an HDF5 file (or cannot be read)");
  try {
    store::probeHdf5Dataset(file, dataset);
  } catch (const store::SessionError& e) {
    throw SourceError(e.what());
  }
  return readHdf5Dataset(file, dataset, InsideProbe{});
}

FloatTensor readHdf5Dataset(const std::string& file, const std::string& dataset, InsideProbe) {
  const h5::Lock lock;  // the one HDF5 lock of the process: a session may be read on another thread
  h5::silenceLibraryDiagnostics();
  if (!h5::looksLikeHdf5(file)) throw SourceError("'" + file + "' is not an HDF5 file (or cannot be read)");
  try {
    h5::File f(lock, file, h5::File::Mode::ReadOnly);
    h5::Group g = f.root();
    std::string rest = dataset;
    while (!rest.empty() && rest.front() == '/') rest.erase(0, 1);
    if (rest.empty()) throw SourceError("'" + file + "': no dataset path given (write file.h5:/group/dataset)");
    for (std::size_t slash; (slash = rest.find('/')) != std::string::npos;) {
      const std::string part = rest.substr(0, slash);
      if (!g.hasGroup(part)) throw SourceError("'" + file + "' has no dataset '" + dataset + "'");
      g = g.openGroup(part);
      rest = rest.substr(slash + 1);
    }
    if (!g.has(rest) || g.hasGroup(rest)) throw SourceError("'" + file + "' has no dataset '" + dataset + "'");
    h5::Dataset ds = g.openDataset(rest);
    const h5::Type type = ds.storedType();
    const bool integer = type == h5::Type::I8 || type == h5::Type::U8 || type == h5::Type::I32 ||
                         type == h5::Type::I64 || type == h5::Type::U16 || type == h5::Type::U32 || type == h5::Type::U64;
    if (type != h5::Type::F32 && type != h5::Type::F16 && type != h5::Type::BF16 && type != h5::Type::F64 && !integer)
      throw SourceError("'" + file + ":" + dataset + "' holds " + h5::typeName(type) + ", not numbers");
    const uint64_t n = ds.checkedElementCount();  // before allocating for what it declares
    if (n > (uint64_t(1) << 34)) throw SourceError("'" + file + ":" + dataset + "' is implausibly large");
    std::vector<float> values(n);
    if (integer) {  // through doubles: every value must be exact in fp32 (labels, token ids)
      std::vector<double> wide(n);
      ds.read(h5::Type::F64, wide.data());
      for (uint64_t i = 0; i < n; ++i) {
        if (wide[i] > 16777216.0 || wide[i] < -16777216.0)
          throw SourceError("'" + file + ":" + dataset + "': value at index " + std::to_string(i) +
                            " is not exact in float32 (|v| <= 2^24 expected)");
        values[i] = float(wide[i]);
      }
    } else {
      ds.read(h5::Type::F32, values.data());
    }
    FloatTensor t = FloatTensor::owned(std::move(values), ds.shape());
    t.dtype = h5::typeName(type);
    t.origin = file + ":" + dataset;
    return t;
  } catch (const h5::Error& e) {
    if (e.call() == h5::kRefused || e.call() == h5::kImplausibleSize)
      throw SourceError("'" + file + ":" + dataset + "' is refused: it " + e.detail());
    throw SourceError("cannot read '" + file + ":" + dataset + "': " + (e.detail().empty() ? e.what() : e.detail()));
  }
}

bool isDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string splitSource(const std::string& data, const std::string& split, const std::string& part) {
  return isDirectory(data) ? data + "/" + split + "_" + part + ".npy" : data + ":/" + split + "/" + part;
}

FloatTensor readSource(const std::string& spec) {
  // "file.h5:/path": the last ':' followed by '/' separates a dataset path.
  const auto split = spec.rfind(":/");
  if (split != std::string::npos) return readHdf5Dataset(spec.substr(0, split), spec.substr(split + 1));
  return readNpy(spec);
}

void writeNpy(const std::string& path, const float* data, const std::vector<uint64_t>& shape, bool overwrite) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  uint64_t count = 1;
  for (uint64_t d : shape) {
    dict += std::to_string(d) + ", ";
    count *= d;
  }
  if (shape.size() > 1) dict.erase(dict.size() - 1);  // "(3, 4)" not "(3, 4, )"; "(5,)" keeps its comma
  dict += "), }";
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  const unsigned char prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(header.size() & 0xff),
                                    static_cast<unsigned char>(header.size() >> 8)};
  std::string bytes(reinterpret_cast<const char*>(prefix), 10);
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(data), count * sizeof(float));
  try {
    util::writeFileAtomically(path, overwrite, bytes);
  } catch (const util::FileRefused& e) {
    throw SourceError(e.what());
  }
}

void checkComparable(const FloatTensor& g, const FloatTensor& c) {
  using util::shapeText;
  if (g.shape() != c.shape())
    throw std::invalid_argument("shapes differ: golden " + shapeText(g.shape()) + ", candidate " + shapeText(c.shape()));
  if (g.dtype != c.dtype) throw std::invalid_argument("element types differ: golden " + g.dtype + ", candidate " + c.dtype);
  if (g.size() == 0) throw std::invalid_argument("the tensors are empty");
  bool allNaN = true;
  for (uint64_t i = 0; i < g.size() && allNaN; ++i) allNaN = std::isnan(g.data()[i]);
  if (allNaN) throw std::invalid_argument("the golden tensor " + g.origin + " is all NaN: nothing to compare");
}

}  // namespace peat::io
