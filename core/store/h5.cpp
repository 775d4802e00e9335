// SPDX-License-Identifier: MIT
#include "core/store/h5.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <zlib.h>

#include "core/fp/format.h"
#include "core/util/text.h"
#include "core/store/journal.h"
#include "core/store/h5_detail.h"

namespace peat::h5 {

namespace {
constexpr const char* kChecksumAttribute = "crc32";

uint32_t bytesChecksum(const void* data, uint64_t size) {
  uLong crc = crc32_z(0L, Z_NULL, 0);
  if (size) crc = crc32_z(crc, static_cast<const Bytef*>(data), z_size_t(size));
  return uint32_t(crc);
}

// The innermost message of HDF5's error stack, which names the actual cause ("truncated file: ...").
std::string innermostMessage() {
  std::string message;
  auto walker = [](unsigned n, const H5E_error2_t* err, void* out) -> herr_t {
    auto* msg = static_cast<std::string*>(out);
    if (n == 0 && err->desc) *msg = err->desc;
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walker, &message);
  H5Eclear2(H5E_DEFAULT);
  // I/O failures carry the OS's reason deep inside a multi-line text: keep just that.
  const auto at = message.find("error message = '");
  if (at != std::string::npos) {
    const auto start = at + 17, end = message.find('\'', start);
    const std::string what = message.substr(0, std::min(message.find(','), message.find(':')));
    return what + ": " + message.substr(start, end == std::string::npos ? std::string::npos : end - start);
  }
  return message.substr(0, message.find('\n'));
}

Handle scalarSpace() { return Handle(checkId(H5Screate(H5S_SCALAR), "H5Screate", "<scalar>"), H5Sclose); }

// Chunks of about 64 Ki elements: large enough for deflate to pay, small enough to read parts cheaply.
std::vector<hsize_t> chunkShape(const std::vector<uint64_t>& shape) {
  std::vector<hsize_t> chunk(shape.begin(), shape.end());
  auto count = [&] {
    hsize_t n = 1;
    for (hsize_t c : chunk) n *= c;
    return n;
  };
  for (std::size_t d = 0; d < chunk.size() && count() > 65536; ++d) {
    while (chunk[d] > 1 && count() > 65536) chunk[d] = (chunk[d] + 1) / 2;
  }
  return chunk;
}

constexpr std::size_t kMaxFixedString = 1 << 20;  // a fixed-size string attribute larger than this is refused

}  // namespace

namespace detail {

[[noreturn]] void fail(const char* call, const std::string& path) { throw Error(call, path, innermostMessage()); }

hid_t checkId(hid_t id, const char* call, const std::string& path) {
  if (id < 0) fail(call, path);
  return id;
}

void check(herr_t rc, const char* call, const std::string& path) {
  if (rc < 0) fail(call, path);
}

Handle stringType() {
  Handle t(checkId(H5Tcopy(H5T_C_S1), "H5Tcopy", "<string type>"), H5Tclose);
  check(H5Tset_size(t.id(), H5T_VARIABLE), "H5Tset_size", "<string type>");
  check(H5Tset_cset(t.id(), H5T_CSET_UTF8), "H5Tset_cset", "<string type>");
  return t;
}

}  // namespace detail

Error::Error(const std::string& call, const std::string& path, const std::string& detail)
    : std::runtime_error(call + " failed on '" + path + "'" + (detail.empty() ? "" : ": " + detail)),
      call_(call),
      path_(path),
      detail_(detail) {}

namespace {
std::atomic<void (*)()> lockObserver{nullptr};
}  // namespace

std::recursive_mutex& lockMutex() {
  static std::recursive_mutex m;
  return m;
}

void setLockObserver(void (*observer)()) { lockObserver.store(observer); }

void notifyLockObserver() {
  if (void (*observer)() = lockObserver.load()) observer();
}

Lock::Lock() : guard_((notifyLockObserver(), lockMutex())) {}

void silenceLibraryDiagnostics() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  detail::registerBoundedDeflate();  // before any chunk is read: once per process
  // HDF5 keeps every block it frees on its own free lists, without limit by default: a replay that
  // opens a few datasets per call grew by about 100 KB per call (800 MB at 5,600 calls). Capped
  // here (1 MiB per list, 16 MiB in all per kind), the blocks past that go back to malloc.
  static const bool limited = H5set_free_list_limits(16 << 20, 1 << 20, 16 << 20, 1 << 20, 16 << 20, 1 << 20) >= 0;
  (void)limited;
}

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    closer_ = o.closer_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

void Handle::reset() {
  if (id_ >= 0 && closer_) closer_(id_);
  id_ = H5I_INVALID_HID;
}

const char* typeName(Type t) {
  switch (t) {
    case Type::F32: return "float32";
    case Type::F64: return "float64";
    case Type::F16: return "float16";
    case Type::BF16: return "bfloat16";
    case Type::I8: return "int8";
    case Type::U8: return "uint8";
    case Type::I32: return "int32";
    case Type::I64: return "int64";
    case Type::U16: return "uint16";
    case Type::U32: return "uint32";
    case Type::U64: return "uint64";
  }
  return "?";
}

std::size_t typeSize(Type t) {
  switch (t) {
    case Type::I8:
    case Type::U8: return 1;
    case Type::F16:
    case Type::BF16:
    case Type::U16: return 2;
    case Type::F32:
    case Type::I32:
    case Type::U32: return 4;
    case Type::F64:
    case Type::I64:
    case Type::U64: return 8;
  }
  return 0;
}

Type typeFromName(const std::string& name) {
  for (Type t : {Type::F32, Type::F64, Type::F16, Type::BF16, Type::I8, Type::U8, Type::I32, Type::I64, Type::U16,
                 Type::U32, Type::U64})
    if (name == typeName(t)) return t;
  throw std::invalid_argument("unknown element type '" + name + "'");
}

Handle memoryType(Type t) {
  hid_t base = H5I_INVALID_HID;
  switch (t) {
    case Type::F32: base = H5T_IEEE_F32LE; break;
    case Type::F64: base = H5T_IEEE_F64LE; break;
    case Type::F16: {
      // IEEE binary16 as a custom float type; h5py maps it to numpy float16, h5dump prints it.
      Handle h(checkId(H5Tcopy(H5T_IEEE_F32LE), "H5Tcopy", "<float16 type>"), H5Tclose);
      check(H5Tset_fields(h.id(), 15, 10, 5, 0, 10), "H5Tset_fields", "<float16 type>");
      check(H5Tset_size(h.id(), 2), "H5Tset_size", "<float16 type>");
      check(H5Tset_ebias(h.id(), 15), "H5Tset_ebias", "<float16 type>");
      return h;
    }
    case Type::BF16:  // numpy has no bfloat16: stored as uint16 patterns with dtype="bfloat16"
    case Type::U16: base = H5T_STD_U16LE; break;
    case Type::I8: base = H5T_STD_I8LE; break;
    case Type::U8: base = H5T_STD_U8LE; break;
    case Type::I32: base = H5T_STD_I32LE; break;
    case Type::I64: base = H5T_STD_I64LE; break;
    case Type::U32: base = H5T_STD_U32LE; break;
    case Type::U64: base = H5T_STD_U64LE; break;
  }
  return Handle(checkId(H5Tcopy(base), "H5Tcopy", typeName(t)), H5Tclose);
}

// ---------------------------------------------------------------- attributes

void setAttribute(hid_t object, const std::string& objectPath, const std::string& name, const std::string& value) {
  if (H5Aexists(object, name.c_str()) > 0) check(H5Adelete(object, name.c_str()), "H5Adelete", objectPath + "@" + name);
  Handle type = stringType();
  Handle space = scalarSpace();
  Handle attr(checkId(H5Acreate2(object, name.c_str(), type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2",
                      objectPath + "@" + name),
              H5Aclose);
  const char* text = value.c_str();
  check(H5Awrite(attr.id(), type.id(), &text), "H5Awrite", objectPath + "@" + name);
}

std::string stringAttribute(hid_t object, const std::string& objectPath, const std::string& name) {
  const std::string where = objectPath + "@" + name;
  Handle attr(checkId(H5Aopen(object, name.c_str(), H5P_DEFAULT), "H5Aopen", where), H5Aclose);
  Handle fileType(checkId(H5Aget_type(attr.id()), "H5Aget_type", where), H5Tclose);
  if (H5Tget_class(fileType.id()) != H5T_STRING) throw Error("H5Aread", where, "attribute is not a string");
  Handle space(checkId(H5Aget_space(attr.id()), "H5Aget_space", where), H5Sclose);
  if (H5Sget_simple_extent_npoints(space.id()) != 1) throw Error("H5Aread", where, "attribute is not a scalar");
  if (H5Tis_variable_str(fileType.id()) > 0) {
    Handle memType = stringType();
    char* text = nullptr;
    check(H5Aread(attr.id(), memType.id(), &text), "H5Aread", where);
    std::string out = text ? text : "";
    H5free_memory(text);
    return out;
  }
  const std::size_t size = H5Tget_size(fileType.id());
  if (size == 0 || size > kMaxFixedString) throw Error("H5Aread", where, "string attribute has an implausible size");
  // one byte more than the file's: a null-terminated string of the file's size would drop the last
  // character of a null-padded one (h5py writes bytes attributes so)
  Handle memType(checkId(H5Tcopy(H5T_C_S1), "H5Tcopy", where), H5Tclose);
  check(H5Tset_size(memType.id(), size + 1), "H5Tset_size", where);
  std::string buffer(size + 1, '\0');
  check(H5Aread(attr.id(), memType.id(), buffer.data()), "H5Aread", where);
  buffer.resize(std::strlen(buffer.c_str()));
  return buffer;
}

namespace {
template <typename T>
void setNumericAttribute(hid_t object, const std::string& path, const std::string& name, hid_t fileType,
                         hid_t memType, T value) {
  const std::string where = path + "@" + name;
  if (H5Aexists(object, name.c_str()) > 0) check(H5Adelete(object, name.c_str()), "H5Adelete", where);
  Handle space = scalarSpace();
  Handle attr(checkId(H5Acreate2(object, name.c_str(), fileType, space.id(), H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2",
                      where),
              H5Aclose);
  check(H5Awrite(attr.id(), memType, &value), "H5Awrite", where);
}

template <typename T>
T numericAttribute(hid_t object, const std::string& path, const std::string& name, hid_t memType) {
  const std::string where = path + "@" + name;
  Handle attr(checkId(H5Aopen(object, name.c_str(), H5P_DEFAULT), "H5Aopen", where), H5Aclose);
  Handle space(checkId(H5Aget_space(attr.id()), "H5Aget_space", where), H5Sclose);
  if (H5Sget_simple_extent_npoints(space.id()) != 1) throw Error("H5Aread", where, "attribute is not a scalar");
  Handle fileType(checkId(H5Aget_type(attr.id()), "H5Aget_type", where), H5Tclose);
  const H5T_class_t cls = H5Tget_class(fileType.id());
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) throw Error("H5Aread", where, "attribute is not numeric");
  T value{};
  check(H5Aread(attr.id(), memType, &value), "H5Aread", where);
  return value;
}
}  // namespace

// ---------------------------------------------------------------- groups

std::string Group::childPath(const std::string& name) const {
  return path_ == "/" ? "/" + name : path_ + "/" + name;
}

Group Group::createGroup(const std::string& name) {
  const std::string p = childPath(name);
  return Group(Handle(checkId(H5Gcreate2(id(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "H5Gcreate2", p),
                      H5Gclose),
               p);
}

namespace {

// A file may come from someone else: a link to another file (external link) would make HDF5 open
// that file (a device, a FIFO, /etc/shadow). Links inside the file are followed.
void refuseExternalLink(hid_t group, const std::string& name, const std::string& path) {
  H5L_info_t info{};
  if (H5Lget_info(group, name.c_str(), &info, H5P_DEFAULT) < 0) return;  // no such link: the open says so
  if (info.type == H5L_TYPE_EXTERNAL)
    throw Error(kRefused, path, "is an external link to another file (a session holds its own data)");
  if (info.type != H5L_TYPE_HARD && info.type != H5L_TYPE_SOFT)
    throw Error(kRefused, path, "is a user-defined link");
}

// The filters a dataset's chunks pass through: only those peat writes (shuffle, then deflate) and
// the Fletcher-32 checksum h5py adds on request, each with the parameters libhdf5 itself sets. A
// crafted pipeline (shuffle declaring another element size, n-bit or scale-offset with garbage
// parameters) crashed H5Dread in an audit (SIGSEGV in peat itself), so it is refused when the
// dataset is opened, before any of its data is read (the probe helper opens every dataset).
void refuseUnsafeFilters(hid_t dataset, hid_t dcpl, const std::string& path) {
  const int filters = H5Pget_nfilters(dcpl);
  if (filters < 0) throw Error(kRefused, path, "has a filter pipeline libhdf5 cannot read");
  if (filters == 0) return;
  if (H5Pget_layout(dcpl) != H5D_CHUNKED) throw Error(kRefused, path, "has filters on data that is not chunked");
  Handle type(checkId(H5Dget_type(dataset), "H5Dget_type", path), H5Tclose);
  const std::size_t elementSize = H5Tget_size(type.id());
  hsize_t chunk[H5S_MAX_RANK] = {};
  const int rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, chunk);
  long double chunkBytes = rank > 0 ? (long double)elementSize : 0;
  for (int d = 0; d < rank; ++d) chunkBytes *= (long double)chunk[d];
  if (rank <= 0 || chunkBytes > (long double)detail::kMaxChunkBytes)
    throw Error(kRefused, path, "declares filtered chunks of " + (rank <= 0 ? std::string("no") : std::to_string(uint64_t(std::min<long double>(chunkBytes, 1e19L)))) +
                                    " bytes (peat reads filtered chunks of up to " + std::to_string(detail::kMaxChunkBytes >> 20) + " MiB)");
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0, config = 0, values[8] = {};
    std::size_t count = 8;
    char name[80] = {};
    const H5Z_filter_t f = H5Pget_filter2(dcpl, unsigned(i), &flags, &count, values, sizeof name, name, &config);
    const std::string which = "filter " + std::to_string(f) + (name[0] ? " (" + util::printable(name) + ")" : "");
    auto refuse = [&](const std::string& why) { throw Error(kRefused, path, "uses HDF5 " + which + ", " + why); };
    if (f == H5Z_FILTER_DEFLATE) {
      if (count != 1 || values[0] > 9) refuse("with parameters deflate does not take");
    } else if (f == H5Z_FILTER_SHUFFLE) {
      if (count < 1 || values[0] != elementSize)
        refuse("declaring elements of " + std::to_string(count ? values[0] : 0) + " bytes where the data's are " +
               std::to_string(elementSize));
    } else if (f == H5Z_FILTER_FLETCHER32) {
      if (count != 0) refuse("with parameters Fletcher-32 does not take");
    } else {
      refuse("which peat does not read (it reads shuffle, deflate and Fletcher-32)");
    }
  }
}

// A dataset whose bytes live outside the file (external raw storage) or in other files (a virtual
// dataset) is refused before anything reads it: its bytes would come from wherever it points.
void refuseForeignStorage(hid_t dataset, const std::string& path) {
  Handle dcpl(checkId(H5Dget_create_plist(dataset), "H5Dget_create_plist", path), H5Pclose);
  const int external = H5Pget_external_count(dcpl.id());
  if (external != 0)
    throw Error(kRefused, path,
                "stores its data in " + std::to_string(external < 0 ? 1 : external) +
                    " file(s) outside the HDF5 file (external raw storage)");
  if (H5Pget_layout(dcpl.id()) == H5D_VIRTUAL)
    throw Error(kRefused, path, "is a virtual dataset that maps other files");
  refuseUnsafeFilters(dataset, dcpl.id(), path);
}

// H5Literate's (Info H5L_info_t) and H5Aiterate2's (H5A_info_t) callback: adds each name to the
// std::vector<std::string> at `out`.
template <class Info>
herr_t collectName(hid_t, const char* name, const Info*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

}  // namespace

Group Group::openGroup(const std::string& name) const {
  const std::string p = childPath(name);
  refuseExternalLink(id(), name, p);
  return Group(Handle(checkId(H5Gopen2(id(), name.c_str(), H5P_DEFAULT), "H5Gopen2", p), H5Gclose), p);
}

bool Group::has(const std::string& name) const {
  if (name.empty() || name.find('/') != std::string::npos) return false;
  const htri_t rc = H5Lexists(id(), name.c_str(), H5P_DEFAULT);
  if (rc < 0) fail("H5Lexists", childPath(name));
  return rc > 0;
}

bool Group::hasGroup(const std::string& name) const {
  if (!has(name)) return false;
  refuseExternalLink(id(), name, childPath(name));
  Handle obj(checkId(H5Oopen(id(), name.c_str(), H5P_DEFAULT), "H5Oopen", childPath(name)), H5Oclose);
  return H5Iget_type(obj.id()) == H5I_GROUP;
}

std::vector<std::string> Group::children() const {
  std::vector<std::string> names;
  hsize_t index = 0;
  check(H5Literate(id(), H5_INDEX_NAME, H5_ITER_INC, &index, collectName<H5L_info_t>, &names), "H5Literate", path_);
  return names;
}

Dataset Group::createDataset(const std::string& name, Type t, const std::vector<uint64_t>& shape, const void* data,
                             const DatasetLayout& layout) {
  const std::string p = childPath(name);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space = dims.empty()
                     ? scalarSpace()
                     : Handle(checkId(H5Screate_simple(int(dims.size()), dims.data(), nullptr), "H5Screate_simple", p),
                              H5Sclose);
  uint64_t count = 1;
  for (uint64_t d : shape) count *= d;

  Handle dcpl(checkId(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate", p), H5Pclose);
  if (layout.chunked && !dims.empty() && count * typeSize(t) >= 4096) {
    const std::vector<hsize_t> chunk = chunkShape(shape);
    check(H5Pset_chunk(dcpl.id(), int(chunk.size()), chunk.data()), "H5Pset_chunk", p);
    check(H5Pset_shuffle(dcpl.id()), "H5Pset_shuffle", p);
    check(H5Pset_deflate(dcpl.id(), unsigned(layout.deflateLevel)), "H5Pset_deflate", p);
  }
  Handle type = memoryType(t);
  Handle ds(checkId(H5Dcreate2(id(), name.c_str(), type.id(), space.id(), H5P_DEFAULT, dcpl.id(), H5P_DEFAULT),
                    "H5Dcreate2", p),
            H5Dclose);
  if (count > 0) {
    if (!data) throw Error("H5Dwrite", p, "no data given for a non-empty dataset");
    check(H5Dwrite(ds.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "H5Dwrite", p);
  }
  h5::setAttribute(ds.id(), p, "dtype", typeName(t));
  // CRC-32 (zlib's) of the element bytes as written, little-endian in the stored type; readers
  // check it on every full read (Dataset::read) and `peat info --verify` on every dataset.
  setNumericAttribute(ds.id(), p, kChecksumAttribute, H5T_STD_I64LE, H5T_NATIVE_INT64,
                      int64_t(bytesChecksum(data, count * typeSize(t))));
  return Dataset(std::move(ds), p);
}

Dataset Group::openDataset(const std::string& name) const {
  const std::string p = childPath(name);
  refuseExternalLink(id(), name, p);
  Handle ds(checkId(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), "H5Dopen2", p), H5Dclose);
  refuseForeignStorage(ds.id(), p);
  return Dataset(std::move(ds), p);
}

bool Group::hasAttribute(const std::string& name) const {
  const htri_t rc = H5Aexists(id(), name.c_str());
  if (rc < 0) fail("H5Aexists", path_ + "@" + name);
  return rc > 0;
}

bool Group::attributeIsText(const std::string& name) const {
  const std::string where = path_ + "@" + name;
  Handle attr(checkId(H5Aopen(id(), name.c_str(), H5P_DEFAULT), "H5Aopen", where), H5Aclose);
  Handle type(checkId(H5Aget_type(attr.id()), "H5Aget_type", where), H5Tclose);
  return H5Tget_class(type.id()) == H5T_STRING;
}

void Group::setAttribute(const std::string& name, const std::string& value) {
  h5::setAttribute(id(), path_, name, value);
}
void Group::setAttribute(const std::string& name, int64_t value) {
  setNumericAttribute(id(), path_, name, H5T_STD_I64LE, H5T_NATIVE_INT64, value);
}
void Group::setAttribute(const std::string& name, double value) {
  setNumericAttribute(id(), path_, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, value);
}
std::string Group::stringAttribute(const std::string& name) const { return h5::stringAttribute(id(), path_, name); }
int64_t Group::intAttribute(const std::string& name) const {
  return numericAttribute<int64_t>(id(), path_, name, H5T_NATIVE_INT64);
}
double Group::doubleAttribute(const std::string& name) const {
  return numericAttribute<double>(id(), path_, name, H5T_NATIVE_DOUBLE);
}

std::vector<std::string> Group::attributeNames() const {
  std::vector<std::string> names;
  hsize_t index = 0;
  check(H5Aiterate2(id(), H5_INDEX_NAME, H5_ITER_INC, &index, collectName<H5A_info_t>, &names), "H5Aiterate2", path_);
  return names;
}

// ---------------------------------------------------------------- datasets

std::vector<uint64_t> Dataset::shape() const {
  Handle space(checkId(H5Dget_space(id()), "H5Dget_space", path_), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.id());
  if (rank < 0) fail("H5Sget_simple_extent_ndims", path_);
  if (rank > 32) throw Error("H5Sget_simple_extent_dims", path_, "rank above 32");
  std::vector<hsize_t> dims(std::size_t(rank), 0);
  if (rank > 0) check(H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr), "H5Sget_simple_extent_dims", path_);
  return {dims.begin(), dims.end()};
}

uint64_t Dataset::elementCount() const {
  uint64_t n = 1;
  for (uint64_t d : shape()) n *= d;
  return n;
}

Type Dataset::storedType() const {
  if (H5Aexists(id(), "dtype") > 0) {
    try {
      return typeFromName(h5::stringAttribute(id(), path_, "dtype"));
    } catch (const std::invalid_argument&) {
      // fall through to the file type
    }
  }
  Handle t(checkId(H5Dget_type(id()), "H5Dget_type", path_), H5Tclose);
  const std::size_t size = H5Tget_size(t.id());
  switch (H5Tget_class(t.id())) {
    case H5T_FLOAT:
      if (size == 2) return Type::F16;
      return size == 8 ? Type::F64 : Type::F32;
    case H5T_INTEGER: {
      const bool isSigned = H5Tget_sign(t.id()) == H5T_SGN_2;
      switch (size) {
        case 1: return isSigned ? Type::I8 : Type::U8;
        case 2: return Type::U16;
        case 4: return isSigned ? Type::I32 : Type::U32;
        default: return isSigned ? Type::I64 : Type::U64;
      }
    }
    default: throw Error("H5Dget_type", path_, "dataset holds neither numbers nor floats");
  }
}

std::optional<uint32_t> Dataset::checksum() const {
  const htri_t has = H5Aexists(id(), kChecksumAttribute);
  if (has < 0) fail("H5Aexists", path_ + "@" + kChecksumAttribute);
  if (!has) return std::nullopt;  // written before checksums (or by another tool)
  const int64_t v = numericAttribute<int64_t>(id(), path_, kChecksumAttribute, H5T_NATIVE_INT64);
  if (v < 0 || v > int64_t(UINT32_MAX)) throw Error("checksum", path_, "the crc32 attribute is out of range");
  return uint32_t(v);
}

void Dataset::verifyBytes(const void* bytes, uint64_t size) const {
  const std::optional<uint32_t> want = checksum();
  if (want && bytesChecksum(bytes, size) != *want)
    throw Error("checksum", path_, "the data does not match the CRC-32 written with it: the session is damaged");
}

void Dataset::read(Type t, void* out) const {
  const Type stored = storedType();
  const uint64_t n = elementCount();
  const Type raw = stored == Type::BF16 ? Type::U16 : stored;  // bfloat16 lives as raw patterns
  if (t == stored || (stored == Type::BF16 && t == Type::U16)) {
    Handle type = memoryType(raw);
    check(H5Dread(id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out), "H5Dread", path_);
    verifyBytes(out, n * typeSize(stored));
    return;
  }
  // A converting read: the stored bytes first (verified), then converted in memory.
  std::vector<unsigned char> buffer(std::size_t(n * std::max(typeSize(stored), typeSize(t))));
  Handle from = memoryType(raw);
  check(H5Dread(id(), from.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()), "H5Dread", path_);
  verifyBytes(buffer.data(), n * typeSize(stored));
  if (stored == Type::BF16 && t == Type::F32) {
    // widen exactly instead of letting HDF5 convert integers
    const auto* bits = reinterpret_cast<const uint16_t*>(buffer.data());
    auto* f = static_cast<float*>(out);
    for (uint64_t i = 0; i < n; ++i) f[i] = fp::floatOf(uint32_t(bits[i]) << 16);
    return;
  }
  Handle to = memoryType(t == Type::BF16 ? Type::U16 : t);
  if (n) check(H5Tconvert(from.id(), to.id(), std::size_t(n), buffer.data(), nullptr, H5P_DEFAULT), "H5Tconvert", path_);
  std::memcpy(out, buffer.data(), std::size_t(n * typeSize(t)));
}

namespace {

// "4.0 TiB": a size as people read it; `exact` adds the byte count ("4.0 TiB (4398046511104 bytes)").
std::string bytesText(uint64_t bytes, bool exact) {
  static const char* const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) v /= 1024, ++u;
  char text[64];
  if (u == 0) std::snprintf(text, sizeof text, "%llu bytes", (unsigned long long)bytes);
  else if (exact) std::snprintf(text, sizeof text, "%.1f %s (%llu bytes)", v, units[u], (unsigned long long)bytes);
  else std::snprintf(text, sizeof text, "%.1f %s", v, units[u]);
  return text;
}

uint64_t physicalMemory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : UINT64_MAX;
}

uint64_t fileSize(hid_t object, const std::string& path) {
  Handle file(checkId(H5Iget_file_id(object), "H5Iget_file_id", path), H5Fclose);
  hsize_t size = 0;
  check(H5Fget_filesize(file.id(), &size), "H5Fget_filesize", path);
  return size;
}

}  // namespace

uint64_t Dataset::checkedElementCount() const {
  // A file may come from someone else: the size it declares must be possible, and fit the bytes it
  // stores, before anyone allocates for it.
  const std::vector<uint64_t> dims = shape();
  Handle type(checkId(H5Dget_type(id()), "H5Dget_type", path_), H5Tclose);
  const uint64_t size = std::max<std::size_t>(H5Tget_size(type.id()), 1);
  const std::string declared = "declares " + util::shapeText(dims) + " elements of " + std::to_string(size) + " bytes";
  uint64_t n = 1;
  bool overflow = false;
  for (uint64_t d : dims) {
    if (d != 0 && n > UINT64_MAX / d) overflow = true;
    n *= d;
  }
  if (n == 0) return 0;
  if (overflow || n > (uint64_t(1) << 62) / size)
    throw Error(kImplausibleSize, path_, declared + ": more than 2^62 bytes");
  const uint64_t claimed = n * size;
  if (claimed > physicalMemory())
    throw Error(kImplausibleSize, path_,
                declared + ": " + bytesText(claimed, true) + ", more than this machine's memory of " +
                    bytesText(physicalMemory(), false));
  // a chunk index names the sizes of its chunks: they cannot add up to more than the whole file
  const uint64_t stored = std::min<uint64_t>(H5Dget_storage_size(id()), fileSize(id(), path_));
  Handle dcpl(checkId(H5Dget_create_plist(id()), "H5Dget_create_plist", path_), H5Pclose);
  const bool chunked = H5Pget_layout(dcpl.id()) == H5D_CHUNKED;
  // deflate expands at most about 1032:1, chunks add their own overhead; variable-length members
  // (strings) are stored as heap references whose size differs from the type's in memory
  const bool varying = H5Tdetect_class(type.id(), H5T_VLEN) > 0 || H5Tdetect_class(type.id(), H5T_STRING) > 0;
  const bool plausible = chunked   ? claimed <= stored * 1100 + (uint64_t(1) << 20)
                         : varying ? claimed <= stored * 2 + 4096
                                   : claimed == stored;
  if (!plausible)
    throw Error(kImplausibleSize, path_,
                declared + ": " + bytesText(claimed, true) + ", but the file stores " + bytesText(stored, true) +
                    " of it");
  return n;
}

void Dataset::verify() const {
  const Type stored = storedType();
  std::vector<unsigned char> bytes(std::size_t(checkedElementCount() * typeSize(stored)));
  read(stored, bytes.data());  // throws on a mismatch
}

// ---------------------------------------------------------------- files

constexpr std::size_t kMetadataCacheBytes = std::size_t(2) << 20;

bool durableCommits() {
  const char* v = std::getenv("PEAT_SYNC");
  return v && *v && std::strcmp(v, "0") != 0;
}

File::File(const Lock&, const std::string& path, Mode mode) : path_(path) {
  // Every file goes through the journaling driver (journal.h): flushes are atomic, and a journal a
  // killed writer left behind is replayed before the file is read.
  const Handle fapl(checkId(journalingAccessList(durableCommits()), "H5Pset_driver", path), H5Pclose);
  // HDF5's metadata cache grows with its hit rate up to 32 MB of on-disk metadata by default, which
  // it holds decoded at about ten times that: walking a session of 4,200 calls and four stored runs
  // held 400 MB, so a replay's or an analysis' peak grew with what the session held. Kept at the
  // library's initial 2 MB, the walk holds 67 MB and runs no slower (measured: docs/benchmarks.md).
  H5AC_cache_config_t cache{};
  cache.version = H5AC__CURR_CACHE_CONFIG_VERSION;
  check(H5Pget_mdc_config(fapl.id(), &cache), "H5Pget_mdc_config", path);
  cache.set_initial_size = true;
  cache.initial_size = kMetadataCacheBytes;
  cache.max_size = kMetadataCacheBytes;
  cache.min_size = std::min<std::size_t>(cache.min_size, kMetadataCacheBytes);
  check(H5Pset_mdc_config(fapl.id(), &cache), "H5Pset_mdc_config", path);
  hid_t id = H5I_INVALID_HID;
  switch (mode) {
    case Mode::ReadOnly: id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.id()); break;
    case Mode::ReadWrite: id = H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl.id()); break;
    case Mode::CreateExclusive: id = H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.id()); break;
    case Mode::Truncate: id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id()); break;
  }
  const bool opening = mode == Mode::ReadOnly || mode == Mode::ReadWrite;
  h_ = Handle(checkId(id, opening ? "H5Fopen" : "H5Fcreate", path), H5Fclose);
}

Group File::root() const {
  return Group(Handle(checkId(H5Gopen2(id(), "/", H5P_DEFAULT), "H5Gopen2", path_ + ":/"), H5Gclose), "/");
}

void File::flush() { check(H5Fflush(id(), H5F_SCOPE_GLOBAL), "H5Fflush", path_); }

void File::renamed(const std::string& newPath) {
  journalFileRenamed(id(), newPath);
  path_ = newPath;
}

// The HDF5 signature at 0, 512, 1024, 2048, ... (where the library looks for a superblock), read
// with plain I/O: no HDF5 call, so any thread may ask without the store's lock, and a FIFO or a
// device is refused without blocking.
bool looksLikeHdf5(const std::string& path) {
  static const unsigned char signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st {};
  bool found = false;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
    for (off_t at = 0; !found && at + 8 <= st.st_size; at = at ? at * 2 : 512) {
      unsigned char head[8];
      found = ::pread(fd, head, 8, at) == 8 && std::memcmp(head, signature, 8) == 0;
    }
  ::close(fd);
  return found;
}

}  // namespace peat::h5

namespace peat::h5 {

void Group::linkTo(const std::string& name, const std::string& target) {
  check(H5Lcreate_hard(id(), target.c_str(), id(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), "H5Lcreate_hard",
        childPath(name) + " -> " + target);
}

void Group::remove(const std::string& name) { check(H5Ldelete(id(), name.c_str(), H5P_DEFAULT), "H5Ldelete", childPath(name)); }

}  // namespace peat::h5
