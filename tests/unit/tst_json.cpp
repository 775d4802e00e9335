// SPDX-License-Identifier: MIT
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonArray>
#include <QtTest>

#include <cmath>
#include <sstream>

#include "core/util/json_writer.h"

class TestJson : public QObject {
  Q_OBJECT
 private slots:
  void parsesBackWithQt();
};

void TestJson::parsesBackWithQt() {
  std::ostringstream s;
  peat::JsonWriter j(s);
  j.beginObject().field("text", "quote \" backslash \\ newline \n tab \t bell \a").field("n", int64_t(-3));
  j.field("x", 0.1).field("nan", std::nan("")).field("yes", true);
  j.key("list").beginArray().value(1).value("two").beginObject().endObject().endArray();
  j.endObject();
  QJsonParseError err{};
  const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString(s.str()), &err);
  QCOMPARE(err.error, QJsonParseError::NoError);
  const QJsonObject o = doc.object();
  QCOMPARE(o[QStringLiteral("text")].toString(), QStringLiteral("quote \" backslash \\ newline \n tab \t bell \a"));
  QCOMPARE(o[QStringLiteral("n")].toInt(), -3);
  QCOMPARE(o[QStringLiteral("x")].toDouble(), 0.1);
  QVERIFY(o[QStringLiteral("nan")].isNull());
  QCOMPARE(o[QStringLiteral("yes")].toBool(), true);
  QCOMPARE(o[QStringLiteral("list")].toArray().size(), 3);
}

QTEST_GUILESS_MAIN(TestJson)
#include "tst_json.moc"
