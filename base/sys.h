// SPDX-License-Identifier: MIT
#pragma once
// The bottom layer's system helpers, for gpu/ and core/ alike: run-time loading of the project's own
// modules (GPU backends, the LibTorch part of core) and file tests.
// They live in <prefix>/<libdir>/peat, found relative to the running executable, so the build
// tree and an installed tree work alike. PEAT_MODULE_DIR overrides the place.
#include <string>

namespace peat::sys {

std::string executableDirectory();
std::string moduleDirectory();
std::string modulePath(const std::string& stem);  // "peat_torch" -> ".../libpeat_torch.so"

// A dlopen()ed library. Modules stay loaded until the process ends: objects they made may outlive us.
class SharedLibrary {
 public:
  // Global: its symbols serve libraries it loads itself later (Open MPI's plugins need libmpi's).
  enum class Symbols { Local, Global };
  explicit SharedLibrary(const std::string& path, Symbols symbols = Symbols::Local);  // throws with dlerror()'s text
  void* symbol(const char* name) const;             // throws when missing
  const std::string& path() const { return path_; }

 private:
  void* handle_ = nullptr;
  std::string path_;
};

bool fileExists(const std::string& path);

}  // namespace peat::sys
