// SPDX-License-Identifier: MIT
#include "core/util/spool_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace peat::util {

SpoolFile::~SpoolFile() {
  if (fd_ >= 0) ::close(fd_);
}

void SpoolFile::open() {
  const std::string::size_type slash = beside_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : beside_.substr(0, std::max<std::size_t>(slash, 1));
  fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  // no O_TMPFILE there: a fresh name (several spools may be open at once, a killed process may have
  // left one behind), unlinked at once
  static std::atomic<unsigned> made{0};
  for (int tries = 0; fd_ < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL || errno == EEXIST) && tries < 64; ++tries) {
    const std::string name = dir + "/.peat-" + std::to_string(::getpid()) + "-" + std::to_string(made++) + ".spool";
    fd_ = ::open(name.c_str(), O_CREAT | O_EXCL | O_NOFOLLOW | O_RDWR | O_CLOEXEC, 0600);
    if (fd_ >= 0) ::unlink(name.c_str());  // nameless from here on, as O_TMPFILE's
  }
  if (fd_ < 0) throw std::runtime_error("cannot keep data beside '" + beside_ + "': " + std::strerror(errno));
}

uint64_t SpoolFile::append(const void* bytes, uint64_t size) {
  if (fd_ < 0) open();
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (uint64_t done = 0; done < size;) {
    const ssize_t n = ::pwrite(fd_, p + done, std::size_t(size - done), off_t(end_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("cannot keep data beside '" + beside_ + "': " + std::strerror(n < 0 ? errno : ENOSPC));
    done += uint64_t(n);
  }
  const uint64_t at = end_;
  end_ += size;
  return at;
}

void SpoolFile::read(uint64_t offset, void* out, uint64_t size) const {
  if (size > 0 && (fd_ < 0 || offset + size > end_ || offset + size < offset))
    throw std::runtime_error("cannot read back the data kept beside '" + beside_ + "': not kept");
  auto* p = static_cast<unsigned char*>(out);
  for (uint64_t done = 0; done < size;) {
    const ssize_t n = ::pread(fd_, p + done, std::size_t(size - done), off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("cannot read back the data kept beside '" + beside_ + "'");
    done += uint64_t(n);
  }
}

}  // namespace peat::util
