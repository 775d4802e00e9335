// SPDX-License-Identifier: MIT
#include "core/data/datasets.h"

#include <dirent.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <set>

namespace peat::data {

namespace {
std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

constexpr std::size_t kMaxDecompressed = std::size_t(1) << 30;  // no data set of ours is near 1 GiB
}  // namespace

const std::vector<std::string>& fashionMnistClasses() {
  static const std::vector<std::string> names{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                              "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

std::vector<uint8_t> gunzipFile(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw DatasetError("cannot open " + path);
  std::vector<uint8_t> out;
  uint8_t buffer[1 << 16];
  for (;;) {
    const int n = gzread(f, buffer, sizeof buffer);
    if (n < 0) {
      int code = 0;
      const std::string why = gzerror(f, &code);
      gzclose(f);
      throw DatasetError(path + " is not a readable gzip file: " + why);
    }
    if (n == 0) break;
    out.insert(out.end(), buffer, buffer + n);
    if (out.size() > kMaxDecompressed) {
      gzclose(f);
      throw DatasetError(path + " decompresses to more than 1 GiB; refusing");
    }
  }
  gzclose(f);
  return out;
}

std::vector<uint8_t> parseIdx(const std::vector<uint8_t>& bytes, int expectedDims, std::vector<int64_t>& dims,
                              const std::string& what) {
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08)
    throw DatasetError(what + " is not an unsigned-byte IDX file");
  const int ndims = bytes[3];
  if (ndims != expectedDims) throw DatasetError(what + " has " + std::to_string(ndims) + " dimensions, expected " +
                                                std::to_string(expectedDims));
  if (bytes.size() < 4 + 4 * std::size_t(ndims)) throw DatasetError(what + " is truncated in its header");
  dims.clear();
  uint64_t count = 1;
  for (int d = 0; d < ndims; ++d) {
    const uint8_t* p = bytes.data() + 4 + 4 * d;
    const int64_t n = (int64_t(p[0]) << 24) | (int64_t(p[1]) << 16) | (int64_t(p[2]) << 8) | int64_t(p[3]);
    dims.push_back(n);
    count *= uint64_t(n);
  }
  const std::size_t offset = 4 + 4 * std::size_t(ndims);
  if (bytes.size() - offset != count)
    throw DatasetError(what + " holds " + std::to_string(bytes.size() - offset) + " bytes of data, its header says " +
                       std::to_string(count));
  return {bytes.begin() + std::ptrdiff_t(offset), bytes.end()};
}

ImageSet loadFashionMnist(const std::string& split, const std::string& dirArg) {
  if (split != "train" && split != "t10k") throw DatasetError("unknown Fashion-MNIST split '" + split + "'");
  const std::string dir = dirArg.empty() ? envOr("PEAT_FASHION_MNIST_DIR", kFashionMnistDir) : dirArg;
  const std::string images = dir + "/" + split + "-images-idx3-ubyte.gz";
  const std::string labels = dir + "/" + split + "-labels-idx1-ubyte.gz";
  struct stat st {};
  if (::stat(images.c_str(), &st) != 0 || ::stat(labels.c_str(), &st) != 0)
    throw DatasetError("Fashion-MNIST not found in " + dir +
                       " (install the Debian package dataset-fashion-mnist: apt-get install dataset-fashion-mnist)");
  ImageSet set;
  std::vector<int64_t> dims;
  set.pixels = parseIdx(gunzipFile(images), 3, dims, images);
  set.count = dims[0];
  set.rows = dims[1];
  set.cols = dims[2];
  set.labels = parseIdx(gunzipFile(labels), 1, dims, labels);
  if (dims[0] != set.count) throw DatasetError(labels + " has a different number of items than " + images);
  for (uint8_t l : set.labels)
    if (l > 9) throw DatasetError(labels + " holds a label outside 0-9");
  return set;
}

TextCorpus loadFortunes(const std::string& dirArg) {
  const std::string dir = dirArg.empty() ? envOr("PEAT_FORTUNES_DIR", kFortunesDir) : dirArg;
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw DatasetError("the fortunes corpus was not found in " + dir +
                             " (install the Debian package fortunes: apt-get install fortunes)");
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name[0] == '.' || name.find('.') != std::string::npos) continue;  // skip .dat and .u8
    struct stat st {};
    const std::string path = dir + "/" + name;
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  if (names.empty()) throw DatasetError("no fortunes files in " + dir + " (install the Debian package fortunes)");
  TextCorpus c;
  for (const std::string& name : names) {
    std::ifstream in(dir + "/" + name, std::ios::binary);
    c.text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    c.sources.push_back(name);
  }
  std::set<unsigned char> distinct(c.text.begin(), c.text.end());
  c.vocabulary.assign(distinct.begin(), distinct.end());
  uint8_t index[256] = {};
  for (std::size_t i = 0; i < c.vocabulary.size(); ++i) index[static_cast<unsigned char>(c.vocabulary[i])] = uint8_t(i);
  c.tokens.resize(c.text.size());
  for (std::size_t i = 0; i < c.text.size(); ++i) c.tokens[i] = index[static_cast<unsigned char>(c.text[i])];
  return c;
}

std::vector<int64_t> seededPermutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[std::size_t(i)] = i;
  std::mt19937_64 rng(seed);
  for (int64_t i = n - 1; i > 0; --i) {
    // Not std::uniform_int_distribution: its algorithm differs between standard libraries.
    const int64_t j = int64_t(rng() % uint64_t(i + 1));
    std::swap(p[std::size_t(i)], p[std::size_t(j)]);
  }
  return p;
}

}  // namespace peat::data
