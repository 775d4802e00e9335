// SPDX-License-Identifier: MIT
#pragma once
// A small RAII layer over the HDF5 C API, shaped after HighFive: move-only handles,
// every C call checked, failures raised as h5::Error naming the call and the object path.
// Only core/store uses it; nothing else in the project talks to HDF5.
#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <optional>
#include <string>
#include <vector>

namespace peat::h5 {

// The call of an Error that is no failure but a refusal of what a file from someone else holds (its
// detail says what: an external link, external raw storage, a virtual dataset).
inline constexpr const char* kRefused = "refuse";
// The call of an Error for a dataset whose declared size cannot be true (more bytes than the file
// stores for it, more than this machine's memory, or an overflow): raised before anything allocates.
inline constexpr const char* kImplausibleSize = "size";

class Error : public std::runtime_error {
 public:
  Error(const std::string& call, const std::string& path, const std::string& detail);
  const std::string& call() const { return call_; }
  const std::string& path() const { return path_; }
  const std::string& detail() const { return detail_; }  // innermost HDF5 message, if any

 private:
  std::string call_, path_, detail_;
};

// HDF5 is usually built without thread safety: every HDF5 call in the process is made while one
// thread holds this (recursive) lock. File's constructor takes it as an argument, so no layer can
// open a file without it; the session layer holds it for every entry point.
class Lock {
 public:
  Lock();
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  std::lock_guard<std::recursive_mutex> guard_;
};
std::recursive_mutex& lockMutex();
// Called on the locking thread before every Lock is taken (the session-access observer of
// store/session.h counts reads on the GUI thread with it); nullptr for none.
void setLockObserver(void (*observer)());
void notifyLockObserver();  // for a thread about to block on a file without the lock

// Silences HDF5's automatic error printing for the whole process; errors surface as h5::Error instead.
void silenceLibraryDiagnostics();

class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(Handle&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  hid_t id() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// Scalar and array element types we store. Half and bfloat16 travel as raw 16-bit patterns.
enum class Type { F32, F64, F16, BF16, I8, U8, I32, I64, U16, U32, U64 };
const char* typeName(Type t);          // "float32", "float16", "bfloat16", ...
std::size_t typeSize(Type t);
Type typeFromName(const std::string& name);  // throws std::invalid_argument

// A memory type id for `t` (owned), e.g. an IEEE 16-bit float type for F16.
Handle memoryType(Type t);

struct DatasetLayout {
  bool chunked = true;  // small or empty datasets are stored contiguously regardless
  int deflateLevel = 4;
};

struct Column {
  std::string name;
  bool isText = false;
  std::vector<std::string> text;  // when isText
  std::vector<double> numbers;    // otherwise
  std::size_t size() const { return isText ? text.size() : numbers.size(); }
};

// The column of that name in a table, or nullptr.
inline const Column* findColumn(const std::vector<Column>& table, const std::string& name) {
  for (const Column& c : table)
    if (c.name == name) return &c;
  return nullptr;
}

class Dataset {
 public:
  Dataset(Handle h, std::string path) : h_(std::move(h)), path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  std::vector<uint64_t> shape() const;
  uint64_t elementCount() const;
  // elementCount(), after checking that its byte count does not overflow, fits this machine's
  // memory and that the file stores enough bytes for it (a damaged or hostile file cannot make a
  // reader allocate more than its data could hold); throws Error(kImplausibleSize) otherwise.
  uint64_t checkedElementCount() const;
  Type storedType() const;  // from the file type, with the "dtype" attribute telling bf16 from u16
  // Reads the whole dataset converted to `t`; `out` must hold elementCount() * typeSize(t) bytes.
  // Throws Error when the stored bytes do not match the dataset's CRC-32 (attribute "crc32").
  void read(Type t, void* out) const;
  std::optional<uint32_t> checksum() const;  // none for datasets written before checksums
  void verify() const;                        // reads it all and checks the checksum
  hid_t id() const { return h_.id(); }

 private:
  void verifyBytes(const void* bytes, uint64_t size) const;
  Handle h_;
  std::string path_;
};

// A group or the file's root group: children, attributes and datasets.
class Group {
 public:
  Group(Handle h, std::string path) : h_(std::move(h)), path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  hid_t id() const { return h_.id(); }

  Group createGroup(const std::string& name);
  Group openGroup(const std::string& name) const;
  bool has(const std::string& name) const;
  bool hasGroup(const std::string& name) const;
  std::vector<std::string> children() const;  // in name order

  Dataset createDataset(const std::string& name, Type t, const std::vector<uint64_t>& shape, const void* data,
                        const DatasetLayout& layout = {});
  Dataset openDataset(const std::string& name) const;
  void remove(const std::string& name);
  // A hard link `name` here to the object at absolute path `target` in the same file.
  void linkTo(const std::string& name, const std::string& target);

  // A 1-D table of records (an HDF5 compound dataset, a numpy structured array in h5py).
  void writeTable(const std::string& name, const std::vector<Column>& columns);
  std::vector<Column> readTable(const std::string& name) const;
  // Adds the rows of `columns` at the end of table `name`, made (chunked, growing) at the first
  // call; the columns must be those it was made with. For tables too long to hold in memory.
  void appendTable(const std::string& name, const std::vector<Column>& columns);

  bool hasAttribute(const std::string& name) const;
  bool attributeIsText(const std::string& name) const;
  void setAttribute(const std::string& name, const std::string& value);
  void setAttribute(const std::string& name, const char* value) { setAttribute(name, std::string(value)); }
  void setAttribute(const std::string& name, int64_t value);
  void setAttribute(const std::string& name, double value);
  std::string stringAttribute(const std::string& name) const;
  int64_t intAttribute(const std::string& name) const;
  double doubleAttribute(const std::string& name) const;
  std::vector<std::string> attributeNames() const;

 private:
  std::string childPath(const std::string& name) const;
  Handle h_;
  std::string path_;
};

// Dataset attributes use the same calls; a Dataset can be viewed as an attribute holder.
void setAttribute(hid_t object, const std::string& objectPath, const std::string& name, const std::string& value);
std::string stringAttribute(hid_t object, const std::string& objectPath, const std::string& name);

class File {
 public:
  enum class Mode { ReadOnly, ReadWrite, CreateExclusive, Truncate };
  File(const Lock& held, const std::string& path, Mode mode);
  const std::string& path() const { return path_; }
  Group root() const;
  // Commits everything written so far, atomically (journal.h); PEAT_SYNC=1 also makes it durable.
  void flush();
  // After the file was renamed on disk while open: later commits journal beside the new name.
  void renamed(const std::string& newPath);
  hid_t id() const { return h_.id(); }

 private:
  Handle h_;
  std::string path_;
};

// True when the file starts with an HDF5 signature; false for missing, unreadable or foreign files.
bool looksLikeHdf5(const std::string& path);

}  // namespace peat::h5
