// SPDX-License-Identifier: MIT
#include "core/util/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>  // renameat2

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace peat::util {

namespace {

std::string quoted(const std::string& path) { return "'" + path + "'"; }

std::string exists(const std::string& path, const std::string& forceFlag) {
  return quoted(path) + " already exists; choose another name" + (forceFlag.empty() ? "" : " or give " + forceFlag) +
         " to replace it";
}

std::string isLink(const std::string& path) {
  return quoted(path) + " is a symbolic link; peat does not write through links: remove it or choose another name";
}

bool writeAll(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= std::size_t(n);
  }
  return true;
}

}  // namespace

void checkWritable(const std::string& path, bool overwrite, const std::string& forceFlag) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // nothing there (or a directory we cannot see: open says)
  if (S_ISLNK(st.st_mode)) throw FileRefused(isLink(path));
  if (S_ISDIR(st.st_mode)) throw FileRefused(quoted(path) + " is a directory");
  if (!overwrite) throw FileRefused(exists(path, forceFlag));
}

void writeFileAtomically(const std::string& path, bool overwrite,
                         const std::function<bool(int fd, const std::string& temporary)>& write,
                         const std::string& forceFlag) {
  checkWritable(path, overwrite, forceFlag);
  const std::string::size_type slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  static std::atomic<unsigned> counter{0};
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; attempt < 64 && fd < 0; ++attempt) {
    const auto tick = std::chrono::steady_clock::now().time_since_epoch().count();
    temporary = dir + "." + base + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
                std::to_string(uint64_t(tick) % 1000003);
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) throw FileRefused("cannot write " + quoted(path) + ": " + std::strerror(errno));
  }
  if (fd < 0) throw FileRefused("cannot write " + quoted(path) + ": no free temporary name beside it");
  bool ok = false;
  errno = 0;  // a writer that fails without setting errno (an image codec) is told as EIO, not a stale errno
  try {
    ok = write(fd, temporary);
  } catch (...) {
    ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
  int err = ok ? 0 : (errno ? errno : EIO);
  if (ok && ::fsync(fd) != 0) ok = false, err = errno;
  if (::close(fd) != 0 && ok) ok = false, err = errno;
  if (!ok) {
    ::unlink(temporary.c_str());
    throw FileRefused("cannot write " + quoted(path) + ": " + std::strerror(err));
  }
  // !overwrite: link() fails if PATH appeared meanwhile (a link planted there included); overwrite:
  // rename() replaces whatever is at PATH, a symbolic link itself rather than what it points to.
  int rc = overwrite ? ::rename(temporary.c_str(), path.c_str()) : ::link(temporary.c_str(), path.c_str());
  err = errno;
  if (rc != 0 && !overwrite && (err == EPERM || err == EOPNOTSUPP)) {  // a file system without hard links
    rc = ::renameat2(AT_FDCWD, temporary.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE);
    err = errno;
  }
  if (rc != 0 || !overwrite) ::unlink(temporary.c_str());
  if (rc != 0) {
    struct stat st {};
    if (err == EEXIST && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) throw FileRefused(isLink(path));
    throw FileRefused(err == EEXIST ? exists(path, forceFlag) : "cannot write " + quoted(path) + ": " + std::strerror(err));
  }
}

void writeFileAtomically(const std::string& path, bool overwrite, const std::string& bytes, const std::string& forceFlag) {
  writeFileAtomically(
      path, overwrite, [&](int fd, const std::string&) { return writeAll(fd, bytes.data(), bytes.size()); }, forceFlag);
}

}  // namespace peat::util
