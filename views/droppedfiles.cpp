// SPDX-License-Identifier: MIT
#include "views/droppedfiles.h"

#include <QFileInfo>
#include <QMimeData>
#include <QUrl>

namespace peat::views {

QStringList localFiles(const QMimeData* mime) {
  QStringList out;
  if (!mime || !mime->hasUrls()) return out;
  for (const QUrl& url : mime->urls())
    if (url.isLocalFile()) out << url.toLocalFile();
  return out;
}

bool isSessionFile(const QString& path) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  return suffix == QLatin1String("h5") || suffix == QLatin1String("hdf5");
}

// A .npy file, or one dataset of an HDF5 file as the CLI names it ("x.h5:/group/dataset"), which
// io::readSource reads (through the probe helper).
bool isTensorFile(const QString& path) {
  if (QFileInfo(path).suffix().toLower() == QLatin1String("npy")) return true;
  const qsizetype colon = path.indexOf(QLatin1String(":/"));
  return colon > 0 && isSessionFile(path.left(colon)) && path.size() > colon + 2;
}

}  // namespace peat::views
