// SPDX-License-Identifier: MIT
// The commands that run in the user's own Python (the package peat, python/): `peat record -- python3
// SCRIPT` and `peat playback` of a Python recording or with a Python candidate. peat execs the
// interpreter with the package on PYTHONPATH, so the script's output, exit code and Ctrl-C are its own.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "app/peat/commands.h"
#include "core/store/session.h"
#include "core/util/text.h"

namespace peat::cli {
namespace {

int fail(const std::string& message, int code) {
  std::cerr << "peat: error: " << peat::util::printable(message) << '\n';  // names from files may hold escapes
  return code;
}

std::string selfDir() {
  std::vector<char> buf(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return ".";
  std::string exe(buf.data(), std::size_t(n));
  return exe.substr(0, exe.rfind('/'));
}

bool isFile(const std::string& p) { return ::access(p.c_str(), R_OK) == 0; }

// The folder holding the package: the build tree's python/ beside bin/, or the installed one.
std::string packageDir() {
  const std::string dir = selfDir();
  for (const std::string& candidate : {dir + "/../python", dir + "/../lib/python3/dist-packages"})
    if (isFile(candidate + "/peat/__init__.py")) return candidate;
  return {};
}

int execPython(const std::string& interpreter, const std::vector<std::string>& args) {
  const std::string pkg = packageDir();
  if (pkg.empty()) return fail("the Python package peat is not installed beside this peat (build it with pybind11-dev)", 1);
  const char* old = std::getenv("PYTHONPATH");
  const std::string path = pkg + (old && *old ? ":" + std::string(old) : "");
  ::setenv("PYTHONPATH", path.c_str(), 1);
  std::vector<std::string> all{interpreter, "-m", "peat"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execvp(interpreter.c_str(), argv.data());
  return fail("cannot run '" + interpreter + "': " + std::strerror(errno), 127);
}

std::string optionValue(const std::vector<std::string>& args, const std::vector<std::string>& names) {
  for (std::size_t i = 0; i < args.size(); ++i)
    for (const std::string& n : names) {
      if (args[i] == n && i + 1 < args.size()) return args[i + 1];
      if (args[i].rfind(n + "=", 0) == 0) return args[i].substr(n.size() + 1);
    }
  return {};
}

// Whether the run playback would replay was recorded by the Python package.
bool pythonRecording(const std::string& session, const std::string& run) {
  try {
    store::SessionReader r(session);
    for (const store::RunInfo& info : r.summaryWithoutTensors().runs)
      if (run.empty() ? info.spec.kind == "profile" && info.callCount() > 0 : info.name == run) {
        const auto it = info.attributes.find("recorder");
        return it != info.attributes.end() && it->second == "peat-python";
      }
  } catch (const std::exception&) {
    return false;  // the C++ playback says what is wrong with the file
  }
  return false;
}

std::string interpreterFromEnvironment() {
  const char* p = std::getenv("PEAT_PYTHON");
  return p && *p ? p : "python3";
}

}  // namespace

int maybeRunPython(int argc, char** argv) {
  if (argc < 2) return -1;
  const std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "record") {
    // peat record [options] -- python3 SCRIPT ARGS: the interpreter is the user's word after --
    std::string interpreter = interpreterFromEnvironment();
    for (std::size_t i = 0; i < args.size(); ++i)
      if (args[i] == "--" && i + 1 < args.size()) {
        const std::string word = args[i + 1];
        const std::string base = word.substr(word.rfind('/') + 1);
        if (base.rfind("python", 0) == 0 && base.find(".py") == std::string::npos) interpreter = word;
        break;
      }
    std::vector<std::string> forwarded{"record"};
    forwarded.insert(forwarded.end(), args.begin(), args.end());
    return execPython(interpreter, forwarded);
  }
  if (command == "playback") {
    for (const std::string& a : args)
      if (a == "--help" || a == "-h") return -1;
    const std::string kernel = optionValue(args, {"-k", "--kernel"});
    const std::string session = optionValue(args, {"-s", "--session"});
    const bool python = kernel.rfind("python:", 0) == 0 ||
                        (kernel == "golden" && !session.empty() && pythonRecording(session, optionValue(args, {"--run"})));
    if (!python) return -1;
    std::vector<std::string> forwarded{"playback"};
    forwarded.insert(forwarded.end(), args.begin(), args.end());
    return execPython(interpreterFromEnvironment(), forwarded);
  }
  return -1;
}

}  // namespace peat::cli
