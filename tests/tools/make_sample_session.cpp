// SPDX-License-Identifier: MIT
// peat-sample-session DIR: writes the fixture files the CLI and layout tests read.
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

#include "tests/support/sample_session.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: peat-sample-session DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  try {
    peat::testsupport::writeSampleSession(dir + "/sample.h5");
    peat::testsupport::writeFutureSession(dir + "/future.h5");
    peat::testsupport::writeForeignHdf5(dir + "/foreign.h5");
    peat::testsupport::writeTruncatedCopy(dir + "/sample.h5", dir + "/truncated.h5", 0.5);
    std::FILE* text = std::fopen((dir + "/notes.txt").c_str(), "w");
    if (!text) throw std::runtime_error("cannot write notes.txt");
    std::fputs("not a session\n", text);
    std::fclose(text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "peat-sample-session: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
