// SPDX-License-Identifier: MIT
#include "core/io/tensor_source.h"

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

// A tiny reader for the Python-literal dict of a .npy header: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  HeaderParser(std::string text, std::string what) : s_(std::move(text)), what_(std::move(what)) {}

  NpyHeader parse() {
    NpyHeader h;
    bool haveDescr = false, haveOrder = false, haveShape = false;
    skip();
    expect('{');
    for (;;) {
      skip();
      if (peek() == '}') break;
      const std::string key = string();
      skip();
      expect(':');
      skip();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"') fail("descr is not a plain type string (structured dtypes are not supported)");
        h.descr = string();
        haveDescr = true;
      } else if (key == "fortran_order") {
        h.fortranOrder = word() == "True";
        haveOrder = true;
      } else if (key == "shape") {
        h.shape = tuple();
        haveShape = true;
      } else {
        fail("unknown header key '" + key + "'");
      }
      skip();
      if (peek() == ',') ++i_;
    }
    if (!haveDescr || !haveOrder || !haveShape) fail("header lacks descr, fortran_order or shape");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw SourceError(what_ + ": bad .npy header: " + why); }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    const auto end = s_.find(quote, i_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }
  std::string word() {
    const std::size_t start = i_;
    while (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_]))) ++i_;
    return s_.substr(start, i_ - start);
  }
  std::vector<uint64_t> tuple() {
    std::vector<uint64_t> dims;
    expect('(');
    for (;;) {
      skip();
      if (peek() == ')') {
        ++i_;
        break;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("shape holds something other than integers");
      uint64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (v > (uint64_t(1) << 50)) fail("shape dimension is implausibly large");
        v = v * 10 + uint64_t(peek() - '0');
        ++i_;
      }
      dims.push_back(v);
      if (dims.size() > 32) fail("more than 32 dimensions");
      skip();
      if (peek() == ',') ++i_;
    }
    return dims;
  }

  std::string s_, what_;
  std::size_t i_ = 0;
};

struct ElementType {
  int bytes = 0;
  std::string name;  // float32, float16
};

ElementType elementType(const std::string& descr, const std::string& what) {
  if (descr.find('O') != std::string::npos)
    throw SourceError(what + ": object arrays are not supported (save a float array)");
  if (descr.size() < 3) throw SourceError(what + ": unsupported dtype '" + descr + "'");
  const char order = descr[0];
  const std::string kind = descr.substr(1);
  if (order == '>' && kind != "f1")
    throw SourceError(what + ": big-endian data ('" + descr + "') is not supported; save with dtype '<" + kind + "'");
  if (order != '<' && order != '|' && order != '=')
    throw SourceError(what + ": unsupported byte order in dtype '" + descr + "'");
  if (kind == "f4") return {4, "float32"};
  if (kind == "f2") return {2, "float16"};
  throw SourceError(what + ": dtype '" + descr + "' is not supported (float32 or float16 expected)");
}

}  // namespace

NpyHeader parseNpyHeader(const unsigned char* b, std::size_t length, const std::string& what) {
  static const unsigned char magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (length < 10 || std::memcmp(b, magic, 6) != 0) throw SourceError(what + " is not a .npy file");
  const int major = b[6];
  std::size_t headerLength = 0, prefix = 0;
  if (major == 1) {
    headerLength = std::size_t(b[8]) | (std::size_t(b[9]) << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (length < 12) throw SourceError(what + ": truncated .npy header");
    headerLength = std::size_t(b[8]) | (std::size_t(b[9]) << 8) | (std::size_t(b[10]) << 16) | (std::size_t(b[11]) << 24);
    prefix = 12;
  } else {
    throw SourceError(what + ": unsupported .npy format version " + std::to_string(major));
  }
  if (headerLength > (1u << 20) || prefix + headerLength > length) throw SourceError(what + ": truncated .npy header");
  NpyHeader h = HeaderParser(std::string(reinterpret_cast<const char*>(b + prefix), headerLength), what).parse();
  h.dataOffset = prefix + headerLength;
  return h;
}

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
    const NpyHeader h = parseNpyHeader(bytes, length, "'" + path + "'");
    if (h.fortranOrder) throw SourceError("'" + path + "' is in Fortran order; save it in C order (np.ascontiguousarray)");
    const ElementType et = elementType(h.descr, "'" + path + "'");
    uint64_t count = 1;
    for (uint64_t d : h.shape) {
      if (d != 0 && count > (uint64_t(1) << 40) / d) throw SourceError("'" + path + "': shape is implausibly large");
      count *= d;
    }
    if (h.dataOffset + count * uint64_t(et.bytes) > length)
      throw SourceError("'" + path + "' is truncated: its header promises " + std::to_string(count) + " elements");
    FloatTensor t;
    if (et.bytes == 4 && h.dataOffset % alignof(float) == 0) {
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
  h5::silenceLibraryDiagnostics();
  if (!h5::looksLikeHdf5(file)) throw SourceError("'" + file + "' is not an HDF5 file (or cannot be read)");
  try {
    h5::File f(file, h5::File::Mode::ReadOnly);
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
    if (type != h5::Type::F32 && type != h5::Type::F16 && type != h5::Type::BF16 && type != h5::Type::F64)
      throw SourceError("'" + file + ":" + dataset + "' holds " + h5::typeName(type) + ", not floats");
    const uint64_t n = ds.elementCount();
    if (n > (uint64_t(1) << 34)) throw SourceError("'" + file + ":" + dataset + "' is implausibly large");
    std::vector<float> values(n);
    ds.read(h5::Type::F32, values.data());
    FloatTensor t = FloatTensor::owned(std::move(values), ds.shape());
    t.dtype = h5::typeName(type);
    t.origin = file + ":" + dataset;
    return t;
  } catch (const h5::Error& e) {
    throw SourceError("cannot read '" + file + ":" + dataset + "': " + (e.detail().empty() ? e.what() : e.detail()));
  }
}

FloatTensor readSource(const std::string& spec) {
  // "file.h5:/path": the last ':' followed by '/' separates a dataset path.
  const auto split = spec.rfind(":/");
  if (split != std::string::npos) return readHdf5Dataset(spec.substr(0, split), spec.substr(split + 1));
  return readNpy(spec);
}

void writeNpy(const std::string& path, const float* data, const std::vector<uint64_t>& shape) {
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
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw SourceError("cannot write '" + path + "'");
  const unsigned char prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(header.size() & 0xff),
                                    static_cast<unsigned char>(header.size() >> 8)};
  out.write(reinterpret_cast<const char*>(prefix), 10);
  out.write(header.data(), std::streamsize(header.size()));
  out.write(reinterpret_cast<const char*>(data), std::streamsize(count * sizeof(float)));
  if (!out) throw SourceError("cannot write '" + path + "'");
}

}  // namespace peat::io
