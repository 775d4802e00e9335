// SPDX-License-Identifier: MIT
#pragma once
// Data sets from Debian packages, read without LibTorch: Fashion-MNIST's gzipped IDX files
// (dataset-fashion-mnist) and a character corpus from the fortunes files (fortunes).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace peat::data {

// Thrown when a data set is missing or malformed; what() names the Debian package to install.
class DatasetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ImageSet {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols, row-major
  std::vector<uint8_t> labels;  // count
};

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
const std::vector<std::string>& fashionMnistClasses();

// Reads "train" or "t10k" from `dir` (default: $PEAT_FASHION_MNIST_DIR, else the Debian path).
ImageSet loadFashionMnist(const std::string& split, const std::string& dir = {});

// Parses an IDX file held in memory (already gunzipped); `what` names it in errors.
std::vector<uint8_t> parseIdx(const std::vector<uint8_t>& bytes, int expectedDims, std::vector<int64_t>& dims,
                              const std::string& what);
std::vector<uint8_t> gunzipFile(const std::string& path);

struct TextCorpus {
  std::string text;               // the raw corpus, bytes mapped through `vocabulary`
  std::vector<uint8_t> tokens;    // index into vocabulary per byte
  std::string vocabulary;         // sorted distinct bytes
  std::vector<std::string> sources;
};

inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";
// Concatenates the fortunes text files (not the .dat indexes) in name order.
TextCorpus loadFortunes(const std::string& dir = {});

// A seeded permutation of [0, n) (Fisher-Yates on a 64-bit LCG-free generator: std::mt19937_64).
std::vector<int64_t> seededPermutation(int64_t n, uint64_t seed);

}  // namespace peat::data
