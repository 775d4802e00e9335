// SPDX-License-Identifier: MIT
// peat-plugin-probe PLUGIN: loads a user kernel in this throw-away process and checks it.
// Prints "ok\tname\tabi\top\tdtype\tmemory" or "error\treason"; a crash is seen by the parent.
#include <cstdio>

#include "core/plugin/plugin_probe.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::printf("error\tusage: peat-plugin-probe PLUGIN\n");
    return 2;
  }
  try {
    const peat::plugin::PluginInfo info = peat::plugin::checkPluginInProcess(argv[1]);
    std::printf("ok\t%s\t%u\t%u\t%u\t%u\n", info.name.c_str(), info.abiVersion, info.opKind, info.dtype, info.memory);
    return 0;
  } catch (const std::exception& e) {
    std::printf("error\t%s\n", e.what());
    return 1;
  }
}
