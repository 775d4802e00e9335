// SPDX-License-Identifier: MIT
// core/store: a session kept when its writer dies, fails or is damaged (split from tst_store).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include <zlib.h>

#include "core/fp/format.h"
#include "core/store/curves.h"
#include "core/store/h5.h"
#include "core/store/journal.h"
#include "core/store/packed_records.h"
#include "core/store/session.h"
#include "tests/support/sample_session.h"

using namespace peat;
using namespace peat::store;

class TestStoreDamage : public QObject {
  Q_OBJECT
 private slots:
  void init();
  void killedWriterKeepsCompleteIterations();
  void damagedBytesAreDetected();
  void unreadableIterationInFlight();
  void abandonedRunIsMarkedFailed();
  void sessionOpenForWritingIsReported();
  void journalsAreReplayedOrDropped();

 private:
  QString path(const char* name) const { return dir_->filePath(QString::fromLatin1(name)); }
  std::unique_ptr<QTemporaryDir> dir_;
};

void TestStoreDamage::init() {
  dir_ = std::make_unique<QTemporaryDir>();
  QVERIFY(dir_->isValid());
}

void TestStoreDamage::killedWriterKeepsCompleteIterations() {
  const std::string p = path("killed.h5").toStdString();
  const pid_t child = fork();
  QVERIFY(child >= 0);
  if (child == 0) {
    // The child writes three complete iterations, starts a fourth, and dies without closing anything.
    SessionWriter w(p, {});
    w.beginRun({"golden", "profile", "golden", ""});
    for (int it = 0; it < 4; ++it) {
      w.beginIteration(it);
      for (int c = 0; c < 3; ++c) {
        std::vector<float> v(5000);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = testsupport::sampleValue(it * 10 + c, long(i));
        w.recordCall({"layer", "linear", Phase::Forward, it, c}, {{"output", {DType::F32, {50, 100}, v.data()}}});
      }
      if (it < 3) w.endIteration();
    }
    raise(SIGKILL);
    _exit(3);
  }
  int status = 0;
  QCOMPARE(waitpid(child, &status, 0), child);
  QVERIFY(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  SessionReader r(p);
  const SessionSummary s = r.summary();
  QCOMPARE(s.runs.size(), std::size_t(1));
  QCOMPARE(s.runs[0].status, std::string("interrupted"));  // nobody ended it, and its writer is gone
  QCOMPARE(s.runs[0].completeIterations(), int64_t(3));
  for (int it = 0; it < 3; ++it)
    for (int c = 0; c < 3; ++c) {
      const Tensor t = r.readTensor("golden", "iterations/00000" + std::to_string(it) + "/calls/00000" + std::to_string(c),
                                    "output");
      const auto* f = reinterpret_cast<const float*>(t.bytes.data());
      QCOMPARE(f[4999], testsupport::sampleValue(it * 10 + c, 4999));
    }
}

// One byte changed on disk inside a tensor's data: every full read of it (as stored, or converted)
// and verify() name the damaged dataset; the rest of the session still reads.
void TestStoreDamage::damagedBytesAreDetected() {
  const std::string p = path("damaged.h5").toStdString();
  testsupport::writeSampleSession(p);
  const std::string run = "golden", call = "iterations/000001/calls/000003";
  {
    SessionReader r(p);
    const SessionReader::Verification v = r.verify();
    QVERIFY(v.datasets > 10);
    QCOMPARE(v.withoutChecksum, uint64_t(0));
    QCOMPARE(v.incompleteGroups, uint64_t(0));
  }
  // where the bytes of the call's labels (6 int64, small enough to be stored contiguous) lie in the file
  haddr_t offset = HADDR_UNDEF;
  {
    const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t ds = H5Dopen2(f, ("/runs/" + run + "/" + call + "/labels").c_str(), H5P_DEFAULT);
    offset = H5Dget_offset(ds);
    H5Dclose(ds);
    H5Fclose(f);
  }
  QVERIFY2(offset != HADDR_UNDEF, "labels is not contiguous: the test needs another dataset");
  {
    std::FILE* f = std::fopen(p.c_str(), "r+b");
    QVERIFY(f);
    QCOMPARE(std::fseek(f, long(offset) + 8 * 3 + 2, SEEK_SET), 0);
    const int byte = std::fgetc(f);
    QCOMPARE(std::fseek(f, long(offset) + 8 * 3 + 2, SEEK_SET), 0);
    std::fputc(byte ^ 0x40, f);
    std::fclose(f);
  }
  SessionReader r(p);
  QCOMPARE(r.summary().runs.size(), std::size_t(1));  // the structure still reads
  auto expectDamaged = [&](const std::function<void()>& f) {
    try {
      f();
    } catch (const SessionError& e) {
      const std::string what = e.what();
      return what.find("labels") != std::string::npos && what.find("CRC-32") != std::string::npos &&
             what.find("damaged") != std::string::npos;
    }
    return false;
  };
  QVERIFY(expectDamaged([&] { r.readTensor(run, call, "labels"); }));
  std::vector<double> asDouble(6);
  QVERIFY(expectDamaged([&] { r.readTensorInto(run, call, "labels", DType::F64, asDouble.data(), asDouble.size()); }));
  QVERIFY(expectDamaged([&] { r.verify(); }));
  // another tensor of the same call is intact
  QCOMPARE(r.readTensor(run, call, "input_0").shape, (std::vector<uint64_t>{64, 128}));
}

// A writer killed in the middle of a flush can leave the group of the iteration in flight pointing
// past the end of the file (seen by cli_crash_kill). Made here with a dangling link: the session
// still reads and verifies, that iteration counted as in flight; the same damage to a complete
// iteration is an error.
void TestStoreDamage::unreadableIterationInFlight() {
  const std::string p = path("midflush.h5").toStdString();
  const std::vector<float> v(100, 1.5f);
  {
    SessionWriter w(p, {});
    w.beginRun({"golden", "profile", "golden", ""});
    for (int it = 0; it < 2; ++it) {
      w.beginIteration(it);
      w.recordCall({"fc", "linear", Phase::Forward, it, 0}, {{"output", {DType::F32, {100}, v.data()}}});
      w.endIteration();
    }
    w.flush();
  }  // the writer ends its run; dangle() below sets it back to running, as a killed writer leaves it
  auto dangle = [&](const char* name) {
    const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t its = H5Gopen2(f, "/runs/golden/iterations", H5P_DEFAULT);
    H5Lcreate_soft("/nowhere", its, name, H5P_DEFAULT, H5P_DEFAULT);
    if (std::string(name) != "000002") H5Ldelete(its, "000001", H5P_DEFAULT);
    H5Gclose(its);
    // the writer above ended its run: make it look killed again
    const hid_t run = H5Gopen2(f, "/runs/golden", H5P_DEFAULT);
    H5Adelete(run, "status");
    H5Gclose(run);
    H5Fclose(f);
    const h5::Lock lock;
    h5::File file(lock, p, h5::File::Mode::ReadWrite);
    file.root().openGroup("runs").openGroup("golden").setAttribute("status", "running");
  };
  dangle("000002");  // an iteration in flight whose group cannot be opened
  {
    SessionReader r(p);
    const SessionSummary s = r.summary();
    QCOMPARE(s.runs[0].status, std::string("interrupted"));  // "running", with no writer alive
    QCOMPARE(s.runs[0].iterations.size(), std::size_t(3));
    QCOMPARE(s.runs[0].completeIterations(), int64_t(2));
    QVERIFY(!s.runs[0].iterations[2].complete);
    // walked an iteration at a time (the probe's walk): the same three, the lost one without calls;
    // the index leaves it out
    std::vector<IterationInfo> walked;
    r.forEachIteration("golden", false, [&](const IterationInfo& it) { walked.push_back(it); });
    QCOMPARE(walked.size(), std::size_t(3));
    QVERIFY(walked[0].complete && walked[1].complete && !walked[2].complete && walked[2].calls.empty());
    QCOMPARE(r.iterationIndex("golden").size(), std::size_t(2));
    const SessionReader::Verification checked = r.verify();
    QCOMPARE(checked.incompleteGroups, uint64_t(1));
    QVERIFY(checked.datasets >= 2);
  }
  dangle("000009");  // ... and now a complete one (000001) is gone: that is damage
  QVERIFY_THROWS_EXCEPTION(SessionError, SessionReader(p).summary());
  const SessionReader inside(p, SessionReader::InsideProbe{});  // the probe's own walk finds it too
  QVERIFY_THROWS_EXCEPTION(SessionError, inside.forEachIteration("golden", false, [](const IterationInfo&) {}));
}

void TestStoreDamage::abandonedRunIsMarkedFailed() {
  const std::string p = path("a.h5").toStdString();
  {
    SessionWriter w(p, {});
    w.beginRun({"r", "profile", "golden", ""});
    w.beginIteration(0);
  }  // destroyed with the run open, as when an exception unwinds
  QCOMPARE(SessionReader(p).summary().runs[0].status, std::string("failed"));
}

void TestStoreDamage::sessionOpenForWritingIsReported() {
  const std::string p = path("busy.h5").toStdString();
  int ready[2];
  QCOMPARE(pipe(ready), 0);
  const pid_t child = fork();
  QVERIFY(child >= 0);
  if (child == 0) {  // a writer that holds the file open until killed
    SessionWriter w(p, {});
    w.beginRun({"golden", "profile", "golden", ""});
    const char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(2);
    pause();
    _exit(0);
  }
  char byte = 0;
  QCOMPARE(read(ready[0], &byte, 1), ssize_t(1));
  QString message;
  try {
    SessionReader r(p);
  } catch (const SessionError& e) {
    message = QString::fromStdString(e.what());
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  QVERIFY2(message.contains(QStringLiteral("open for writing")), qPrintable(message));
  QCOMPARE(SessionReader(p).summary().runs.size(), std::size_t(1));  // readable once the writer is gone
}

// The journaling driver (core/store/journal.h) at the file level: a writer killed with a complete
// journal beside its file; that journal replayed by the next reader; a copy of it beside a new
// session of another name never applied there; and an incomplete journal dropped.
void TestStoreDamage::journalsAreReplayedOrDropped() {
  const std::string killed = path("journal-killed.h5").toStdString();
  const std::string fresh = path("journal-fresh.h5").toStdString();
  const std::string garbage = path("journal-garbage.h5").toStdString();
  const pid_t child = fork();
  QVERIFY(child >= 0);
  if (child == 0) {  // killed by the driver right after its 4th journal is complete
    setenv("PEAT_TEST_COMMIT_CRASH", "4:journal", 1);
    SessionWriter w(killed, {});
    w.beginRun({"golden", "profile", "golden", ""});
    std::vector<float> v(3000, 1.5f);
    for (int it = 0; it < 20; ++it) {
      w.beginIteration(it);
      w.recordCall({"layer", "linear", Phase::Forward, it, 0}, {{"output", {DType::F32, {3000}, v.data()}}});
      w.endIteration();
    }
    _exit(3);
  }
  int status = 0;
  QCOMPARE(waitpid(child, &status, 0), child);
  QVERIFY(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  const QString journal = QString::fromStdString(h5::journalPath(killed));
  QVERIFY(QFile::exists(journal));
  QVERIFY(QFile::copy(journal, QString::fromStdString(h5::journalPath(fresh))));

  // Without write access the journal is held in memory over the file: the session reads as
  // committed, and neither the file nor the journal changes.
  auto bytes = [](const std::string& file) {
    QFile f(QString::fromStdString(file));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  };
  const QByteArray before = bytes(killed);
  setenv("PEAT_TEST_JOURNAL_NO_WRITE", "1", 1);
  const SessionSummary held = SessionReader(killed).summary();
  SessionReader(killed).verify();
  unsetenv("PEAT_TEST_JOURNAL_NO_WRITE");
  QVERIFY(QFile::exists(journal));
  QVERIFY(bytes(killed) == before);

  const SessionSummary s = SessionReader(killed).summary();  // replays the journal
  QVERIFY(!QFile::exists(journal));
  QVERIFY(bytes(killed) != before);
  QCOMPARE(held.runs.size(), std::size_t(1));
  QCOMPARE(held.runs[0].completeIterations(), s.runs[0].completeIterations());
  QCOMPARE(s.runs.size(), std::size_t(1));
  QVERIFY2(s.runs[0].completeIterations() >= 1, qPrintable(QString::number(s.runs[0].completeIterations())));
  SessionReader(killed).verify();

  {
    SessionWriter w(fresh, {});
    // gone the moment the session has its name: a kill from here on must not find it
    QVERIFY(!QFile::exists(QString::fromStdString(h5::journalPath(fresh))));
    w.beginRun({"other", "profile", "golden", ""});
    w.endRun(RunStatus::Complete);
  }
  QVERIFY(!QFile::exists(QString::fromStdString(h5::journalPath(fresh))));
  const SessionSummary f = SessionReader(fresh).summary();
  QCOMPARE(f.runs.size(), std::size_t(1));
  QCOMPARE(f.runs[0].name, std::string("other"));

  testsupport::writeSampleSession(garbage);
  {
    QFile j(QString::fromStdString(h5::journalPath(garbage)));
    QVERIFY(j.open(QIODevice::WriteOnly));
    j.write("PEATJNL1 a journal cut short by a kill");
  }
  SessionReader(garbage).verify();
  QVERIFY(!QFile::exists(QString::fromStdString(h5::journalPath(garbage))));

  // A well-formed journal (right CRC) that writes a page 2^52 bytes in, as a crafted one could:
  // dropped, and the file neither grows nor changes.
  const QByteArray clean = bytes(garbage);
  {
    QByteArray j("PEATJNL1");
    auto u64 = [&j](uint64_t v) {
      for (int i = 0; i < 8; ++i) j.append(char(v >> (8 * i)));
    };
    u64(4096), u64(1), u64(~uint64_t(0)), u64(uint64_t(1) << 40);
    j.append(QByteArray(4096, '\x5a'));
    const uint32_t crc = uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(j.constData()), uInt(j.size())));
    for (int i = 0; i < 4; ++i) j.append(char(crc >> (8 * i)));
    j.append("COMMITED");
    QFile out(QString::fromStdString(h5::journalPath(garbage)));
    QVERIFY(out.open(QIODevice::WriteOnly));
    out.write(j);
  }
  SessionReader(garbage).verify();
  QVERIFY(!QFile::exists(QString::fromStdString(h5::journalPath(garbage))));
  QVERIFY(bytes(garbage) == clean);
}

QTEST_MAIN(TestStoreDamage)
#include "tst_store_damage.moc"
