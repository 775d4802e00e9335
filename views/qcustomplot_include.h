// SPDX-License-Identifier: MIT
#pragma once
// qcustomplot.h predates our Qt hygiene macros (it uses foreach and casts from ASCII), so they are
// lifted for the translation units that include it. Include this file first in such a unit, before
// any Qt header, so Qt's own headers see the lifted macros consistently.
#undef QT_NO_FOREACH
#undef QT_NO_CAST_FROM_ASCII
#include <qcustomplot.h>
