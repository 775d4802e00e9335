// SPDX-License-Identifier: MIT
#include "base/sys.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#ifndef PEAT_MODULE_RELATIVE_DIR
#error "PEAT_MODULE_RELATIVE_DIR must be defined by the build"
#endif

namespace peat::sys {

std::string executableDirectory() {
  char buffer[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return ".";
  std::string path(buffer, std::size_t(n));
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string moduleDirectory() {
  if (const char* env = std::getenv("PEAT_MODULE_DIR"); env && *env) return env;
  return executableDirectory() + "/" PEAT_MODULE_RELATIVE_DIR;
}

std::string modulePath(const std::string& stem) { return moduleDirectory() + "/lib" + stem + ".so"; }

bool fileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

SharedLibrary::SharedLibrary(const std::string& path, Symbols symbols) : path_(path) {
  handle_ = ::dlopen(path.c_str(), RTLD_NOW | (symbols == Symbols::Global ? RTLD_GLOBAL : RTLD_LOCAL));
  if (!handle_) {
    const char* why = ::dlerror();
    throw std::runtime_error("cannot load '" + path + "': " + (why ? why : "unknown error"));
  }
}

void* SharedLibrary::symbol(const char* name) const {
  ::dlerror();
  void* s = ::dlsym(handle_, name);
  if (!s) throw std::runtime_error("module '" + path_ + "' lacks the entry point '" + name + "'");
  return s;
}

}  // namespace peat::sys
