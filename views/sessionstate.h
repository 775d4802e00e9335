// SPDX-License-Identifier: MIT
#pragma once
// The session a window shows, as its controllers see it: the reader (shared with the jobs that read
// through it; null while no session is open or while a run writes the file), the tree's summary
// and the file's path. The window owns it and changes it only on the GUI thread.
#include <QString>

#include <memory>

#include "core/store/session.h"

namespace peat::views {

struct SessionState {
  std::shared_ptr<store::SessionReader> reader;
  std::shared_ptr<const store::SessionSummary> summary;
  QString path;
};

}  // namespace peat::views
