// SPDX-License-Identifier: MIT
#pragma once
// Files dropped on the window (or given on the command line): sessions and tensors, told apart by
// their suffix.
#include <QString>
#include <QStringList>

class QMimeData;

namespace peat::views {

QStringList localFiles(const QMimeData* mime);  // the local files a drag carries
bool isSessionFile(const QString& path);        // .h5, .hdf5
bool isTensorFile(const QString& path);         // .npy

}  // namespace peat::views
