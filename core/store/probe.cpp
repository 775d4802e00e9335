// SPDX-License-Identifier: MIT
#include "core/store/probe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <sstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "base/sys.h"
#include "core/store/h5.h"
#include "core/util/helper_process.h"

namespace peat::store {
namespace {

// What identifies a file's contents without reading them. ctime changes with every write, chmod,
// rename or utime, and cannot be set by a user.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  int64_t modifiedSec = 0, modifiedNsec = 0, changedSec = 0, changedNsec = 0;
  auto key() const { return std::tie(device, inode, size, modifiedSec, modifiedNsec, changedSec, changedNsec); }
  bool operator<(const FileIdentity& o) const { return key() < o.key(); }
  bool operator==(const FileIdentity& o) const { return key() == o.key(); }
};

std::optional<FileIdentity> identityOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return FileIdentity{st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_ctim.tv_sec,
                      st.st_ctim.tv_nsec};
}

std::mutex mutex;                   // guards the sets below and the cache file's use in this process
std::set<FileIdentity> probedHere;  // passed a probe in this process
std::map<uint64_t, std::pair<dev_t, ino_t>> writtenHere;  // held by a SessionWriter of this process
uint64_t nextWriter = 1;

std::string cachePath() {
  if (const char* p = std::getenv("PEAT_PROBE_CACHE"); p && *p) return std::strcmp(p, "off") == 0 ? "" : p;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return std::string(x) + "/peat/probed";
  if (const char* h = std::getenv("HOME"); h && *h == '/') return std::string(h) + "/.cache/peat/probed";
  return "";
}

// The cache: one line per file, "device inode size mtime_s mtime_ns ctime_s ctime_ns". At most
// kCacheLines are kept (the newest); a line that does not parse is ignored.
constexpr std::size_t kCacheLines = 512;

// The cache is believed only when it is this user's own file, not writable by others.
bool cacheIsOurs(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::getuid() &&
         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

// Filesystems whose kernel keeps ctime itself (a user cannot set it): local ones. On network and
// FUSE filesystems (sshfs reports ctime = mtime, which the owner can set) a file is always probed.
bool keepsTrueCtime(const std::string& path) {
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0xEF53UL:      // ext2/3/4
    case 0x58465342UL:  // xfs
    case 0x9123683EUL:  // btrfs
    case 0x01021994UL:  // tmpfs
    case 0x794C7630UL:  // overlayfs
    case 0x2FC12FC1UL:  // zfs
    case 0xF2F52010UL:  // f2fs
      return true;
    default:
      return false;
  }
}

std::vector<FileIdentity> readCache(const std::string& path) {
  std::vector<FileIdentity> out;
  if (!cacheIsOurs(path)) return out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream s(line);
    unsigned long long dev = 0, ino = 0;
    long long size = 0;
    FileIdentity f;
    if (s >> dev >> ino >> size >> f.modifiedSec >> f.modifiedNsec >> f.changedSec >> f.changedNsec) {
      f.device = dev_t(dev);
      f.inode = ino_t(ino);
      f.size = off_t(size);
      out.push_back(f);
    }
  }
  return out;
}

bool inCache(const FileIdentity& f) {
  const std::string path = cachePath();
  if (path.empty()) return false;
  for (const FileIdentity& c : readCache(path))
    if (c == f) return true;
  return false;
}

// Written to a temporary file and renamed over the cache: a reader never sees half a file. Failing
// to write the cache only costs a later probe.
void addToCache(const FileIdentity& f) {
  const std::string path = cachePath();
  if (path.empty()) return;
  std::vector<FileIdentity> lines = readCache(path);
  lines.erase(std::remove(lines.begin(), lines.end(), f), lines.end());
  lines.push_back(f);
  if (lines.size() > kCacheLines) lines.erase(lines.begin(), lines.end() - std::ptrdiff_t(kCacheLines));
  if (path.find('/') != std::string::npos) {
    const std::string dir = path.substr(0, path.rfind('/'));
    const std::string parent = dir.substr(0, dir.rfind('/'));
    if (!parent.empty()) ::mkdir(parent.c_str(), 0700);
    if (!dir.empty()) ::mkdir(dir.c_str(), 0700);
  }
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
  std::ostringstream text;
  for (const FileIdentity& c : lines)
    text << (unsigned long long)c.device << ' ' << (unsigned long long)c.inode << ' ' << (long long)c.size << ' '
         << c.modifiedSec << ' ' << c.modifiedNsec << ' ' << c.changedSec << ' ' << c.changedNsec << '\n';
  const std::string data = text.str();
  // this user's alone (cacheIsOurs): created 0600, never through a link
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  const bool written = ::write(fd, data.data(), data.size()) == ssize_t(data.size());
  ::close(fd);
  if (!written) {
    ::unlink(temporary.c_str());
    return;
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) ::unlink(temporary.c_str());
}

double timeoutSeconds(bool verify) { return sys::probeTimeout(verify ? 600 : 20); }

// Runs the helper; its first line is "ok..." or "error\treason". Returns the "ok" line.
std::string runProbe(const std::vector<std::string>& argv, const std::string& path, double seconds) {
  const sys::HelperResult r = sys::runHelper(argv, seconds);
  if (!r.started) throw SessionError("cannot check '" + path + "' in a helper process: " + r.output);
  if (r.timedOut)
    throw SessionError("reading '" + path + "' did not finish within " + std::to_string(int(seconds)) +
                       " s (the HDF5 library hangs on it): the file is damaged or was crafted; it was not opened");
  if (r.signal)
    throw SessionError("reading '" + path + "' crashed the HDF5 library (" + sys::describeSignal(r.signal) +
                       "): the file is damaged or was crafted; it was not opened");
  if (r.output.rfind("error\t", 0) == 0) throw SessionError(r.output.substr(6));
  return r.output;
}

std::string helperPath() { return sys::moduleDirectory() + "/peat-probe"; }

SessionReader::Verification probeSessionNow(const std::string& path, bool verify) {
  const std::string helper = helperPath();
  if (!sys::fileExists(helper)) {  // a build without the helper reads in process, as before
    SessionReader reader(path, SessionReader::InsideProbe{});
    return verify ? reader.verify() : SessionReader::Verification{};
  }
  std::vector<std::string> argv{helper, "session", path};
  if (verify) argv.push_back("--verify");
  const std::string ok = runProbe(argv, path, timeoutSeconds(verify));
  // "ok\tRUNS" or, verified, "ok\tRUNS\tDATASETS\tBYTES\tWITHOUT_CHECKSUM\tINCOMPLETE\tREAD_WHOLE"
  unsigned long long runs = 0, datasets = 0, bytes = 0, without = 0, incomplete = 0, whole = 0;
  const int fields = std::sscanf(ok.c_str(), "ok\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu", &runs, &datasets, &bytes, &without,
                                 &incomplete, &whole);
  if (fields != (verify ? 6 : 1)) throw SessionError("the session check answered in an unknown format: " + ok);
  SessionReader::Verification v{datasets, bytes, without, incomplete, whole, {}, {}};
  // "without\tPATH" and "whole\tPATH" lines after the first
  std::istringstream lines(ok);
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    if (line.rfind("without\t", 0) == 0) v.withoutChecksumPaths.push_back(line.substr(8));
    if (line.rfind("whole\t", 0) == 0) v.readWholePaths.push_back(line.substr(6));
  }
  return v;
}

}  // namespace

void checkSessionPath(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw SessionError("cannot open '" + path + "': " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw SessionError("cannot open '" + path + "': it is a directory");
  if (::access(path.c_str(), R_OK) != 0) throw SessionError("cannot open '" + path + "': " + std::strerror(errno));
  if (!h5::looksLikeHdf5(path)) throw SessionError("'" + path + "' is not an HDF5 file, so not a PEAT session");
}

uint64_t registerWrittenFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  const std::lock_guard<std::mutex> lock(mutex);
  writtenHere[nextWriter] = {st.st_dev, st.st_ino};
  return nextWriter++;
}

void unregisterWrittenFile(uint64_t token) {
  const std::lock_guard<std::mutex> lock(mutex);
  writtenHere.erase(token);
}

bool isWrittenHere(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  const std::lock_guard<std::mutex> lock(mutex);
  for (const auto& [token, file] : writtenHere)
    if (file == std::make_pair(st.st_dev, st.st_ino)) return true;
  return false;
}

SessionReader::Verification probeSession(const std::string& path, bool verify) {
  notifySessionAccess();
  checkSessionPath(path);  // no process for a missing file, a directory or a file of another kind
  const std::optional<FileIdentity> before = identityOf(path);
  if (!verify) {
    if (isWrittenHere(path)) return {};
    if (before) {
      const std::lock_guard<std::mutex> lock(mutex);
      if (probedHere.count(*before) || inCache(*before)) {
        probedHere.insert(*before);
        return {};
      }
    }
  }
  const std::time_t started = std::time(nullptr);
  const SessionReader::Verification v = probeSessionNow(path, verify);
  const std::optional<FileIdentity> after = identityOf(path);
  // Remembered only when what passed is what is there now, and when its ctime was old enough that
  // a change after the probe gives another ctime (timestamps can be as coarse as a second).
  if (before && after && *before == *after && after->changedSec + 2 <= int64_t(started) && keepsTrueCtime(path)) {
    const std::lock_guard<std::mutex> lock(mutex);
    probedHere.insert(*after);
    addToCache(*after);
  }
  return v;
}

void probeHdf5Dataset(const std::string& path, const std::string& dataset) {
  notifySessionAccess();
  const std::string helper = helperPath();
  if (!sys::fileExists(helper)) return;  // a build without the helper reads in process, as before
  runProbe({helper, "hdf5", path, dataset}, path, timeoutSeconds(true));  // it reads the data, as --verify does
}

}  // namespace peat::store
