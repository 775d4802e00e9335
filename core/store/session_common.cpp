// SPDX-License-Identifier: MIT
#include "core/store/session_common.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <ctime>

#include "core/store/probe.h"

namespace peat::store {

namespace detail {

std::string utcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

bool isSafeName(const std::string& name) {
  if (name.empty() || name.size() > 200 || name == "." || name == "..") return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

void requireSafeName(const std::string& what, const std::string& name) {
  if (!isSafeName(name))
    throw SessionError(what + " name '" + name + "' is not allowed: use letters, digits, '-', '_' and '.'");
}

void damaged(const std::string& path, const h5::Error& e) {
  if (e.call() == h5::kRefused)  // crafted, not damaged: it points outside itself
    throw SessionError("session '" + path + "' is refused: '" + e.path() + "' " + e.detail());
  if (e.call() == h5::kImplausibleSize)  // damaged or crafted: refused before anything is allocated
    throw SessionError("session '" + path + "' is refused: tensor '" + e.path() + "' " + e.detail());
  throw SessionError("session '" + path + "' is damaged: " + e.what());
}

void writeTensors(h5::Group& group, const std::vector<NamedTensor>& tensors, const h5::DatasetLayout& layout) {
  for (const NamedTensor& t : tensors) {
    requireSafeName("tensor", t.name);
    if (!t.linkTo.empty())
      group.linkTo(t.name, t.linkTo);
    else
      group.createDataset(t.name, t.view.dtype, t.view.shape, t.view.data, layout);
  }
}

void writeRecord(h5::Group& g, const ResultRecord& record) {
  for (const auto& [key, value] : record.scalars) g.setAttribute(key, value);
  for (const auto& [key, value] : record.labels) g.setAttribute(key, value);
  writeTensors(g, record.arrays);
}

Tensor readWholeTensor(const h5::Dataset& ds) {
  Tensor t;
  t.dtype = ds.storedType();
  t.shape = ds.shape();
  ds.checkedElementCount();  // the file holds the bytes it claims, before allocating for them
  t.bytes.resize(t.elementCount() * h5::typeSize(t.dtype));
  ds.read(t.dtype, t.bytes.data());
  return t;
}

StoredRecord readRecord(const h5::Group& g) {
  StoredRecord r;
  for (const std::string& name : g.attributeNames()) {
    if (g.attributeIsText(name))
      r.labels[name] = g.stringAttribute(name);
    else
      r.scalars[name] = g.doubleAttribute(name);
  }
  for (const std::string& name : g.children()) {
    h5::Dataset ds = g.openDataset(name);
    r.arrays.emplace(name, readWholeTensor(ds));
  }
  return r;
}

}  // namespace detail

void setSessionAccessObserver(void (*observer)()) { h5::setLockObserver(observer); }
void notifySessionAccess() { h5::notifyLockObserver(); }

std::string indexName(int64_t index) {
  char text[32];
  std::snprintf(text, sizeof text, "%06lld", static_cast<long long>(index));
  return text;
}

}  // namespace peat::store
