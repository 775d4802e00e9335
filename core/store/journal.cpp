// SPDX-License-Identifier: MIT
#include "core/store/journal.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <vector>

namespace peat::h5 {

namespace {

constexpr uint64_t kPage = 4096;
constexpr char kHeadMagic[8] = {'P', 'E', 'A', 'T', 'J', 'N', 'L', '1'};
constexpr char kCommitMagic[8] = {'C', 'O', 'M', 'M', 'I', 'T', 'E', 'D'};
constexpr uint64_t kNoSize = ~uint64_t(0);
constexpr uint64_t kJournalSlack = uint64_t(1) << 30;  // how far past the file's end a replay may write
constexpr std::size_t kHeadBytes = 8 + 3 * 8;  // magic, page size, page count, file size after commit
constexpr std::size_t kTailBytes = 4 + 8;      // CRC-32 of everything before it, commit mark

struct Config {
  int durable = 0;
};

struct JournalFile {
  H5FD_t pub;  // first: HDF5 sees this
  int fd = -1;
  std::string path, journal;
  bool writable = false, durable = false;
  dev_t device = 0;
  ino_t inode = 0;
  haddr_t eoa = 0, eof = 0;
  uint64_t protectedPages = 0;  // pages below this index belong to the last committed state
  std::map<uint64_t, std::vector<unsigned char>> held;  // page -> its new bytes, until the next commit
  uint64_t truncateTo = kNoSize;
  // A write or a commit failed (a full disk): HDF5's structures in memory may now point at bytes the
  // file never got, so nothing more is committed; the file keeps the state of the last commit.
  bool failed = false;
  int failedErrno = 0;  // why, for the message of each commit refused after it
  bool journalTaken = false;  // a commit found something at the journal's name (a planted link)
};

void markFailed(JournalFile& f, int err) {
  if (!f.failed) f.failedErrno = err;
  f.failed = true;
}

void pushError(const char* func, H5E_major_t maj, H5E_minor_t min, const std::string& text) {
  H5Epush2(H5E_DEFAULT, __FILE__, func, __LINE__, H5E_ERR_CLS, maj, min, "%s", text.c_str());
}

std::string osError(const std::string& what, int err) {
  return what + ", errno = " + std::to_string(err) + ", error message = '" + std::strerror(err) + "'";
}

// Reads [addr, addr+size) from fd; bytes past the end of the file read as zero (like sec2).
bool readAll(int fd, uint64_t addr, unsigned char* out, uint64_t size) {
  while (size > 0) {
    const ssize_t n = ::pread(fd, out, std::size_t(std::min<uint64_t>(size, 1u << 30)), off_t(addr));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      std::memset(out, 0, std::size_t(size));
      return true;
    }
    out += n, addr += uint64_t(n), size -= uint64_t(n);
  }
  return true;
}

bool writeAll(int fd, uint64_t addr, const unsigned char* in, uint64_t size) {
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, in, std::size_t(std::min<uint64_t>(size, 1u << 30)), off_t(addr));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    in += n, addr += uint64_t(n), size -= uint64_t(n);
  }
  return true;
}

uint64_t pagesCovering(uint64_t bytes) { return (bytes + kPage - 1) / kPage; }

void putU64(std::vector<unsigned char>& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
uint64_t getU64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint32_t crcOf(const unsigned char* p, std::size_t n) {
  return uint32_t(crc32_z(crc32_z(0L, Z_NULL, 0), p, z_size_t(n)));
}

// A test hook, like a SIGKILL at one moment of a commit: PEAT_TEST_COMMIT_CRASH="N:stage" kills the
// process in its N-th commit that writes a journal, at stage "journal-half" (half the journal
// written), "journal" (journal complete, file untouched) or "apply-half" (half the pages applied).
void crashPoint(const char* stage) {
  const char* spec = std::getenv("PEAT_TEST_COMMIT_CRASH");
  if (!spec) return;
  static long commits = 0;
  if (std::strcmp(stage, "commit") == 0) {
    ++commits;
    return;
  }
  const char* colon = std::strchr(spec, ':');
  if (!colon || std::atol(spec) != commits || std::strcmp(colon + 1, stage) != 0) return;
  ::kill(::getpid(), SIGKILL);
}

// The journal's page records, checked; false when it is incomplete or damaged (never committed).
struct Journal {
  uint64_t fileSize = kNoSize;
  std::vector<std::pair<uint64_t, const unsigned char*>> pages;
  std::vector<unsigned char> bytes;
};

bool parseJournal(const std::string& path, Journal& j) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);  // a planted link is no journal
  if (fd < 0) return false;
  struct stat st {};
  const bool sized = ::fstat(fd, &st) == 0 && uint64_t(st.st_size) >= kHeadBytes + kTailBytes;
  if (sized) {
    j.bytes.resize(std::size_t(st.st_size));
    if (!readAll(fd, 0, j.bytes.data(), j.bytes.size())) j.bytes.clear();
  }
  ::close(fd);
  if (!sized || j.bytes.empty()) return false;
  const unsigned char* b = j.bytes.data();
  const std::size_t n = j.bytes.size();
  if (std::memcmp(b, kHeadMagic, 8) != 0 || getU64(b + 8) != kPage) return false;
  const uint64_t count = getU64(b + 16);
  if (count > (n - kHeadBytes - kTailBytes) / (8 + kPage) ||
      kHeadBytes + count * (8 + kPage) + kTailBytes != n)
    return false;
  if (std::memcmp(b + n - 8, kCommitMagic, 8) != 0) return false;
  const unsigned char* crc = b + n - kTailBytes;
  const uint32_t stored = uint32_t(crc[0]) | uint32_t(crc[1]) << 8 | uint32_t(crc[2]) << 16 | uint32_t(crc[3]) << 24;
  if (crcOf(b, n - kTailBytes) != stored) return false;
  j.fileSize = getU64(b + 24);
  for (uint64_t i = 0; i < count; ++i) {
    const unsigned char* rec = b + kHeadBytes + i * (8 + kPage);
    j.pages.emplace_back(getU64(rec), rec + 8);
  }
  return true;
}

bool syncDirectoryOf(const std::string& path) {
  const std::string::size_type slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

// Writes a parsed journal's pages into fd (and sets the file's size); true when every write landed.
bool applyJournal(int fd, const Journal& j, uint64_t stopAfter = kNoSize) {
  uint64_t applied = 0;
  for (const auto& [page, bytes] : j.pages) {
    if (applied++ == stopAfter) crashPoint("apply-half");
    if (!writeAll(fd, page * kPage, bytes, kPage)) return false;
  }
  return j.fileSize == kNoSize || ::ftruncate(fd, off_t(j.fileSize)) == 0;
}

// Before a file is used: a complete journal left by a writer that died while committing is
// replayed into the file (or, when the file cannot be written, held in memory over it); an
// incomplete one is dropped. Done only while no other process has the file open.
bool recover(JournalFile& f, unsigned flags) {
  struct stat st {};
  if (::stat(f.journal.c_str(), &st) != 0) return true;
  if ((flags & H5F_ACC_TRUNC) || (flags & H5F_ACC_EXCL)) {
    ::unlink(f.journal.c_str());  // a journal of an older file by that name
    return true;
  }
  if (::flock(f.fd, LOCK_EX | LOCK_NB) != 0) return true;  // a live writer's; HDF5's own lock says so
  Journal j;
  bool ok = true;
  // A journal may come with a file from someone else: pages far past the file's end (or a size
  // far beyond it) are no commit of ours, and would only grow a huge sparse file.
  struct stat file {};
  const uint64_t limit = ::fstat(f.fd, &file) == 0 ? uint64_t(file.st_size) + kJournalSlack : 0;
  auto plausible = [&] {
    if (j.fileSize != kNoSize && j.fileSize > limit) return false;
    for (const auto& page : j.pages)
      if (page.first >= limit / kPage) return false;
    return true;
  };
  if (parseJournal(f.journal, j) && plausible()) {
    // PEAT_TEST_JOURNAL_NO_WRITE stands for a file this user cannot write (tests run as root).
    const bool mayWrite = !std::getenv("PEAT_TEST_JOURNAL_NO_WRITE");
    const int out = f.writable ? f.fd : mayWrite ? ::open(f.path.c_str(), O_RDWR | O_CLOEXEC) : -1;
    if (out >= 0) {
      ok = applyJournal(out, j) && (!f.durable || ::fdatasync(out) == 0);
      if (out != f.fd) ::close(out);
      if (ok) ::unlink(f.journal.c_str());
    } else {
      // A read-only copy: show the committed state without changing the file.
      for (const auto& [page, bytes] : j.pages) f.held[page].assign(bytes, bytes + kPage);
      f.protectedPages = kNoSize;
      if (j.fileSize != kNoSize) f.eof = j.fileSize;
    }
  } else {
    ::unlink(f.journal.c_str());  // never committed: the file holds the previous state
  }
  ::flock(f.fd, LOCK_UN);
  if (!ok) pushError("recover", H5E_VFL, H5E_WRITEERROR, osError("unable to replay journal '" + f.journal + "'", errno));
  return ok;
}

bool commitNow(JournalFile& f);

// Makes everything written since the last commit part of the file, atomically (see journal.h);
// after a failure, never again.
bool commit(JournalFile& f) {
  if (!f.writable) return true;
  if (f.failed) {
    errno = EIO;
    return false;
  }
  if (commitNow(f)) return true;
  markFailed(f, errno);
  return false;
}

bool commitNow(JournalFile& f) {
  if (f.held.empty() && f.truncateTo == kNoSize) {
    f.protectedPages = std::max(f.protectedPages, pagesCovering(f.eoa));
    return !f.durable || ::fdatasync(f.fd) == 0;
  }
  crashPoint("commit");
  // New space first: a committed structure may point there once the pages below are applied.
  if (f.durable && ::fdatasync(f.fd) != 0) return false;
  Journal j;
  j.fileSize = f.truncateTo;
  std::vector<unsigned char>& b = j.bytes;
  b.reserve(kHeadBytes + f.held.size() * (8 + kPage) + kTailBytes);
  b.insert(b.end(), kHeadMagic, kHeadMagic + 8);
  putU64(b, kPage);
  putU64(b, f.held.size());
  putU64(b, f.truncateTo);
  for (const auto& [page, bytes] : f.held) {
    putU64(b, page);
    b.insert(b.end(), bytes.begin(), bytes.end());
  }
  const uint32_t crc = crcOf(b.data(), b.size());
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<unsigned char>(crc >> (8 * i)));
  b.insert(b.end(), kCommitMagic, kCommitMagic + 8);
  for (const auto& [page, bytes] : f.held) j.pages.emplace_back(page, bytes.data());

  // Created anew at each commit (the last one removed it): whatever is there now, a link planted to
  // make peat overwrite the file it points to above all, is refused, never written through.
  const int jfd = ::open(f.journal.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (jfd < 0) {
    if (errno == EEXIST || errno == ELOOP) {
      f.journalTaken = true;
      errno = EEXIST;
    }
    return false;
  }
  bool ok;
  if (std::getenv("PEAT_TEST_COMMIT_CRASH")) {
    ok = writeAll(jfd, 0, b.data(), b.size() / 2);
    crashPoint("journal-half");
    ok = ok && writeAll(jfd, b.size() / 2, b.data() + b.size() / 2, b.size() - b.size() / 2);
  } else {
    ok = writeAll(jfd, 0, b.data(), b.size());
  }
  ok = ok && (!f.durable || (::fsync(jfd) == 0 && syncDirectoryOf(f.journal)));
  const int err = errno;
  ::close(jfd);
  if (!ok) {
    ::unlink(f.journal.c_str());
    errno = err;
    return false;
  }
  crashPoint("journal");
  if (!applyJournal(f.fd, j, j.pages.size() / 2) || (f.durable && ::fdatasync(f.fd) != 0)) return false;
  // the next commit creates the journal anew (O_EXCL): one left here would fail every commit after
  if (::unlink(f.journal.c_str()) != 0 && errno != ENOENT) return false;
  if (f.truncateTo != kNoSize) f.eof = f.truncateTo;
  f.held.clear();
  f.truncateTo = kNoSize;
  f.protectedPages = std::max(f.protectedPages, pagesCovering(f.eoa));
  return true;
}

// ------------------------------------------------------------------ the driver's callbacks

H5FD_t* jOpen(const char* name, unsigned flags, hid_t fapl, haddr_t maxaddr) {
  if (!name || !*name || maxaddr == 0 || maxaddr == HADDR_UNDEF) {
    pushError("jOpen", H5E_ARGS, H5E_BADVALUE, "invalid file name or address space");
    return nullptr;
  }
  Config config;
  if (const void* info = H5Pget_driver_info(fapl)) config = *static_cast<const Config*>(info);
  int oflags = O_CLOEXEC | ((flags & H5F_ACC_RDWR) ? O_RDWR : O_RDONLY);
  if (flags & H5F_ACC_TRUNC) oflags |= O_TRUNC;
  if (flags & H5F_ACC_CREAT) oflags |= O_CREAT;
  if (flags & H5F_ACC_EXCL) oflags |= O_EXCL;
  // a file peat makes or empties is never reached through a link (an existing one it opens may be)
  if (flags & (H5F_ACC_TRUNC | H5F_ACC_EXCL)) oflags |= O_NOFOLLOW;
  const int fd = ::open(name, oflags, 0666);
  if (fd < 0) {
    pushError("jOpen", H5E_FILE, H5E_CANTOPENFILE,
              osError(std::string("unable to open file: name = '") + name + "'", errno));
    return nullptr;
  }
  auto* f = new (std::nothrow) JournalFile();
  if (!f) {
    ::close(fd);
    pushError("jOpen", H5E_RESOURCE, H5E_NOSPACE, "out of memory");
    return nullptr;
  }
  std::memset(&f->pub, 0, sizeof f->pub);
  f->fd = fd;
  f->path = name;
  f->journal = journalPath(name);
  f->writable = (flags & H5F_ACC_RDWR) != 0;
  f->durable = config.durable != 0;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0;
  if (ok) {
    f->device = st.st_dev, f->inode = st.st_ino;
    ok = recover(*f, flags) && ::fstat(fd, &st) == 0;
  } else {
    pushError("jOpen", H5E_FILE, H5E_BADFILE, osError("unable to fstat file", errno));
  }
  if (!ok) {
    ::close(fd);
    delete f;
    return nullptr;
  }
  f->eof = std::max<haddr_t>(f->eof, haddr_t(st.st_size));
  if (f->protectedPages != kNoSize) f->protectedPages = pagesCovering(uint64_t(st.st_size));
  return &f->pub;
}

JournalFile* self(H5FD_t* file) { return reinterpret_cast<JournalFile*>(file); }
const JournalFile* self(const H5FD_t* file) { return reinterpret_cast<const JournalFile*>(file); }

herr_t jClose(H5FD_t* file) {
  JournalFile* f = self(file);
  const bool ok = commit(*f);
  const int err = errno;
  if (::close(f->fd) != 0 && ok) {
    pushError("jClose", H5E_IO, H5E_CANTCLOSEFILE, osError("unable to close file", errno));
    delete f;
    return -1;
  }
  delete f;
  if (!ok) {
    pushError("jClose", H5E_IO, H5E_WRITEERROR, osError("unable to commit the last changes", err));
    return -1;
  }
  return 0;
}

int jCompare(const H5FD_t* a, const H5FD_t* b) {
  const JournalFile *x = self(a), *y = self(b);
  if (x->device != y->device) return x->device < y->device ? -1 : 1;
  if (x->inode != y->inode) return x->inode < y->inode ? -1 : 1;
  return 0;
}

herr_t jQuery(const H5FD_t*, unsigned long* flags) {
  if (flags)
    *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE |
             H5FD_FEAT_AGGREGATE_SMALLDATA;
  return 0;
}

haddr_t jGetEoa(const H5FD_t* file, H5FD_mem_t) { return self(file)->eoa; }
herr_t jSetEoa(H5FD_t* file, H5FD_mem_t, haddr_t addr) {
  self(file)->eoa = addr;
  return 0;
}
haddr_t jGetEof(const H5FD_t* file, H5FD_mem_t) { return self(file)->eof; }

herr_t jGetHandle(H5FD_t* file, hid_t, void** handle) {
  if (!handle) return -1;
  *handle = self(file);
  return 0;
}

herr_t jRead(H5FD_t* file, H5FD_mem_t, hid_t, haddr_t addr, size_t size, void* buffer) {
  JournalFile* f = self(file);
  if (addr == HADDR_UNDEF || addr + size < addr) {
    pushError("jRead", H5E_ARGS, H5E_OVERFLOW, "file address overflowed");
    return -1;
  }
  auto* out = static_cast<unsigned char*>(buffer);
  if (!readAll(f->fd, addr, out, size)) {
    pushError("jRead", H5E_IO, H5E_READERROR, osError("file read failed: addr = " + std::to_string(addr), errno));
    return -1;
  }
  if (f->held.empty() || size == 0) return 0;
  const uint64_t first = addr / kPage, last = (addr + size - 1) / kPage;
  for (auto it = f->held.lower_bound(first); it != f->held.end() && it->first <= last; ++it) {
    const uint64_t start = std::max<uint64_t>(addr, it->first * kPage);
    const uint64_t end = std::min<uint64_t>(addr + size, (it->first + 1) * kPage);
    std::memcpy(out + (start - addr), it->second.data() + (start - it->first * kPage), std::size_t(end - start));
  }
  return 0;
}

herr_t jWrite(H5FD_t* file, H5FD_mem_t, hid_t, haddr_t addr, size_t size, const void* buffer) {
  JournalFile* f = self(file);
  if (!f->writable) {
    pushError("jWrite", H5E_IO, H5E_WRITEERROR, "file is open read-only");
    return -1;
  }
  if (addr == HADDR_UNDEF || addr + size < addr) {
    pushError("jWrite", H5E_ARGS, H5E_OVERFLOW, "file address overflowed");
    return -1;
  }
  const auto* in = static_cast<const unsigned char*>(buffer);
  const uint64_t end = addr + size;
  const uint64_t protectedEnd = f->protectedPages >= kNoSize / kPage ? kNoSize : f->protectedPages * kPage;
  try {
    for (uint64_t at = addr; at < std::min(end, protectedEnd);) {
      const uint64_t page = at / kPage;
      auto it = f->held.find(page);
      if (it == f->held.end()) {
        std::vector<unsigned char> bytes(kPage);
        if (!readAll(f->fd, page * kPage, bytes.data(), kPage)) {
          markFailed(*f, errno);
          pushError("jWrite", H5E_IO, H5E_READERROR, osError("file read failed", errno));
          return -1;
        }
        it = f->held.emplace(page, std::move(bytes)).first;
      }
      const uint64_t stop = std::min(end, (page + 1) * kPage);
      std::memcpy(it->second.data() + (at - page * kPage), in + (at - addr), std::size_t(stop - at));
      at = stop;
    }
  } catch (const std::bad_alloc&) {
    markFailed(*f, ENOMEM);
    pushError("jWrite", H5E_RESOURCE, H5E_NOSPACE, "out of memory holding changed pages");
    return -1;
  }
  if (end > protectedEnd) {
    const uint64_t from = std::max(addr, protectedEnd);
    if (!writeAll(f->fd, from, in + (from - addr), end - from)) {
      markFailed(*f, errno);
      pushError("jWrite", H5E_IO, H5E_WRITEERROR, osError("file write failed: addr = " + std::to_string(from), errno));
      return -1;
    }
  }
  f->eof = std::max<haddr_t>(f->eof, end);
  return 0;
}

herr_t jFlush(H5FD_t* file, hid_t, hbool_t) {
  JournalFile* f = self(file);
  const bool refused = f->failed;
  if (commit(*f)) return 0;
  pushError("jFlush", H5E_IO, H5E_WRITEERROR,
            f->journalTaken ? "the journal's name '" + f->journal +
                                  "' is taken (peat never writes through a file or link there): remove it"
            : refused       ? std::string("a write failed earlier (") + std::strerror(f->failedErrno) +
                            "), so the file keeps its last committed state"
                            : osError("unable to commit the changes", errno));
  return -1;
}

herr_t jTruncate(H5FD_t* file, hid_t, hbool_t) {
  JournalFile* f = self(file);
  if (f->writable && f->eoa != f->eof) {
    f->truncateTo = f->eoa;  // done by the next commit, after the pages that may still need the space
    f->eof = f->eoa;
  }
  return 0;
}

herr_t jLock(H5FD_t* file, hbool_t rw) {
  if (::flock(self(file)->fd, (rw ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0) return 0;
  pushError("jLock", H5E_VFL, H5E_CANTLOCKFILE, osError("unable to lock file", errno));
  return -1;
}

herr_t jUnlock(H5FD_t* file) {
  if (::flock(self(file)->fd, LOCK_UN) == 0) return 0;
  pushError("jUnlock", H5E_VFL, H5E_CANTUNLOCKFILE, osError("unable to unlock file", errno));
  return -1;
}

hid_t driverId() {
  static hid_t id = H5I_INVALID_HID;
  static std::once_flag once;
  std::call_once(once, [] {
    static H5FD_class_t cls;
    std::memset(&cls, 0, sizeof cls);
    cls.name = "peat-journal";
    cls.maxaddr = (haddr_t(1) << (8 * sizeof(off_t) - 1)) - 1;
    cls.fc_degree = H5F_CLOSE_WEAK;
    cls.fapl_size = sizeof(Config);
    cls.open = jOpen;
    cls.close = jClose;
    cls.cmp = jCompare;
    cls.query = jQuery;
    cls.get_eoa = jGetEoa;
    cls.set_eoa = jSetEoa;
    cls.get_eof = jGetEof;
    cls.get_handle = jGetHandle;
    cls.read = jRead;
    cls.write = jWrite;
    cls.flush = jFlush;
    cls.truncate = jTruncate;
    cls.lock = jLock;
    cls.unlock = jUnlock;
    const H5FD_mem_t map[] = H5FD_FLMAP_DICHOTOMY;
    std::copy(std::begin(map), std::end(map), cls.fl_map);
    id = H5FDregister(&cls);
  });
  return id;
}

}  // namespace

std::string journalPath(const std::string& path) { return path + "-journal"; }

hid_t journalingAccessList(bool durable) {
  const hid_t driver = driverId();
  if (driver < 0) return H5I_INVALID_HID;
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0) return fapl;
  Config config;
  config.durable = durable ? 1 : 0;
  if (H5Pset_driver(fapl, driver, &config) < 0) {
    H5Pclose(fapl);
    return H5I_INVALID_HID;
  }
  return fapl;
}

void journalFileRenamed(hid_t file, const std::string& newPath) {
  const hid_t fapl = H5Fget_access_plist(file);
  if (fapl < 0) return;
  const bool ours = H5Pget_driver(fapl) == driverId();
  H5Pclose(fapl);
  void* handle = nullptr;
  if (!ours || H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || !handle) return;
  auto* f = static_cast<JournalFile*>(handle);
  f->path = newPath;
  f->journal = journalPath(newPath);
}

}  // namespace peat::h5
