// SPDX-License-Identifier: MIT
#pragma once
// Tensors for `--golden` / `--candidate` and a model file's data: NumPy .npy files and HDF5 datasets
// ("file.h5:/path"), read as fp32 (fp16 and bf16 are widened exactly; integers such as labels and
// token ids are read when every value is exact in fp32, |v| <= 2^24). Torch-free.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace peat::io {

class SourceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// fp32 values with a shape. Backed by a read-only file mapping when the file already holds
// little-endian fp32 in C order (no copy), else by an owned buffer.
class FloatTensor {
 public:
  FloatTensor() = default;
  FloatTensor(FloatTensor&&) noexcept;
  FloatTensor& operator=(FloatTensor&&) noexcept;
  ~FloatTensor();

  const float* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::vector<uint64_t>& shape() const { return shape_; }
  std::string dtype;   // element type in the source: "float32", "float16", "bfloat16"
  std::string origin;  // where it came from, for messages

  static FloatTensor owned(std::vector<float> values, std::vector<uint64_t> shape);
  static FloatTensor mapped(void* base, std::size_t length, const float* data, uint64_t size,
                            std::vector<uint64_t> shape);

 private:
  const float* data_ = nullptr;
  uint64_t size_ = 0;
  std::vector<uint64_t> shape_;
  std::vector<float> owned_;
  void* map_ = nullptr;
  std::size_t mapLength_ = 0;
};

struct NpyHeader {
  std::string descr;  // e.g. "<f4"
  bool fortranOrder = false;
  std::vector<uint64_t> shape;
  std::size_t dataOffset = 0;
};

// Parses the header of a .npy file held in `bytes` (its first `length` bytes at least).
// Throws SourceError naming what is unsupported: big-endian, Fortran order, object arrays, ...
NpyHeader parseNpyHeader(const unsigned char* bytes, std::size_t length, const std::string& what);

struct ElementType {
  int bytes = 0;
  std::string name;  // float32, float16, int8, uint8, ..., int64
  bool integer() const { return name.rfind("int", 0) == 0 || name.rfind("uint", 0) == 0; }
};
ElementType elementType(const std::string& descr, const std::string& what);

// A checked .npy: header, element type and element count fit in `length` bytes.
struct NpyLayout {
  NpyHeader header;
  ElementType element;
  uint64_t count = 0;
};
NpyLayout validateNpy(const unsigned char* bytes, std::size_t length, const std::string& what);

FloatTensor readNpy(const std::string& path);
// An HDF5 file may come from someone else: it is read first in the probe helper
// (core/store/probe.h). The InsideProbe form reads it here: only for the helper itself.
FloatTensor readHdf5Dataset(const std::string& file, const std::string& dataset);
struct InsideProbe {};
FloatTensor readHdf5Dataset(const std::string& file, const std::string& dataset, InsideProbe);
// "x.npy" or "x.h5:/group/dataset".
FloatTensor readSource(const std::string& spec);

// Whether `path` names a directory.
bool isDirectory(const std::string& path);

// Labelled data as `--data` names it: part "x" or "y" of split "train" or "test" is DATA/SPLIT_PART.npy
// in a folder, or DATA:/SPLIT/PART in an HDF5 file (a source for readSource).
std::string splitSource(const std::string& data, const std::string& split, const std::string& part);

// Throws std::invalid_argument unless a golden and a candidate tensor can be compared element by
// element: the same shape and element type, not empty, and a golden tensor that is not all NaN.
void checkComparable(const FloatTensor& golden, const FloatTensor& candidate);

// Writes a C-order little-endian fp32 .npy through util::writeFileAtomically: never through a link at
// PATH, and replacing an existing file only when OVERWRITE.
void writeNpy(const std::string& path, const float* data, const std::vector<uint64_t>& shape, bool overwrite = false);

}  // namespace peat::io
