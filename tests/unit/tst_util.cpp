// SPDX-License-Identifier: MIT
// core/util: the campaign key every sharded kind uses, the one parallelFor, and the event stream's
// line format (docs/events.md).
#include <QtTest>

#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <set>
#include <stdexcept>
#include <vector>

#include "core/cli/torch_commands.h"
#include "core/util/campaign_key.h"
#include "core/util/sha256.h"
#include "core/util/spool_file.h"
#include "core/util/events.h"
#include "core/util/parallel.h"
#include "core/util/worker_pool.h"

#include <thread>

#include <sys/wait.h>
#include <unistd.h>

using peat::util::CampaignKey;

class TestUtil : public QObject {
  Q_OBJECT
 private slots:
  void campaignKeyIsCanonicalText();
  void campaignKeyNamesWhatDiffers();
  void campaignKeyEscapesSeparators();
  void parallelForRunsEveryWorkerOnce();
  void parallelForRethrowsAWorkersException();
  void parallelRangesCoverEachIndexOnce();
  void workerPoolRunsEveryWorkerOnceAcrossRuns();
  void workerPoolRethrowsAndStaysUsable();
  void workerPoolTakesNestedAndConcurrentRuns();
  void workerPoolStartsAfreshInAForkedChild();
  void eventLinesAreVersionedJson();
  void torchCommandsRoundTrip();
  void sha256MatchesFipsVectors();
  void spoolFileKeepsBytesNamelessly();
};

// FIPS 180-4 examples (one block, two blocks) and a million 'a's (padding across many blocks).
void TestUtil::sha256MatchesFipsVectors() {
  auto digest = [](const std::string& text) {
    peat::util::Sha256 h;
    h.update(text.data(), text.size());
    return h.hex();
  };
  QCOMPARE(digest("abc"), std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  QCOMPARE(digest(""), std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
  QCOMPARE(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
           std::string("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
  peat::util::Sha256 h;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) h.update(chunk.data(), chunk.size());
  QCOMPARE(h.hex(), std::string("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
}

void TestUtil::campaignKeyIsCanonicalText() {
  const CampaignKey k = CampaignKey().add("kernel", "bf16").add("seed", uint64_t(7)).add("tau", 1e-5).add("on", true);
  QCOMPARE(k.text(), std::string("kernel=bf16;seed=7;tau=1.0000000000000001e-05;on=1"));
  // read back, the same text and id; a double prints so that it reads back exactly
  const CampaignKey back = CampaignKey::parse(k.text());
  QCOMPARE(back.text(), k.text());
  QCOMPARE(back.id(), k.id());
  QCOMPARE(std::strtod(back.value("tau").c_str(), nullptr), 1e-5);
  QCOMPARE(k.id().size(), std::size_t(8));
  QVERIFY(k.id() != CampaignKey().add("kernel", "bf16").add("seed", uint64_t(8)).id());
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, CampaignKey().add("a=b", "x"));
}

void TestUtil::campaignKeyNamesWhatDiffers() {
  const CampaignKey a = CampaignKey::parse("kernel=bf16;seed=4;op=all");
  const CampaignKey b = CampaignKey::parse("kernel=bf16;seed=5;layer=fc1");
  QCOMPARE(a.differenceFrom(b), std::string("seed=5 vs seed=4, layer=fc1 vs (none), op (none) vs op=all"));
  QCOMPARE(a.differenceFrom(a), std::string());
}

void TestUtil::campaignKeyEscapesSeparators() {
  const CampaignKey k = CampaignKey().add("weights", "a;b.h5").add("next", "x=y");
  const CampaignKey back = CampaignKey::parse(k.text());
  QCOMPARE(back.fields().size(), std::size_t(2));
  QCOMPARE(back.value("weights"), std::string("a%3Bb.h5"));
  QVERIFY(CampaignKey().add("weights", "a%3Bb.h5").add("next", "x=y").text() != k.text());  // "%" is escaped too
  QCOMPARE(back.value("next"), std::string("x=y"));  // only the first '=' separates
}

// The engine's kept workers: 2000 fork-joins of 1 to 5 workers (more than the threads kept at first,
// then fewer), every worker index run exactly once per run, on more than one thread.
void TestUtil::workerPoolRunsEveryWorkerOnceAcrossRuns() {
  peat::util::WorkerPool pool;
  std::vector<std::atomic<int>> runs(5);
  std::mutex m;
  std::set<std::thread::id> threads;
  for (int r = 0; r < 2000; ++r) {
    const unsigned workers = unsigned(1 + (r * 7) % 5);
    for (auto& n : runs) n = 0;
    pool.run(workers, [&](unsigned w) {
      ++runs[w];
      std::lock_guard<std::mutex> lock(m);
      threads.insert(std::this_thread::get_id());
    });
    for (unsigned w = 0; w < 5; ++w) QCOMPARE(runs[w].load(), w < workers ? 1 : 0);
  }
  QCOMPARE(int(threads.size()), 5);  // the caller and four kept threads, however many runs
}

void TestUtil::workerPoolRethrowsAndStaysUsable() {
  peat::util::WorkerPool pool;
  for (const unsigned failing : {0u, 2u}) {
    std::atomic<int> ran{0};
    bool caught = false;
    try {
      pool.run(3, [&](unsigned w) {
        ++ran;
        if (w == failing) throw std::runtime_error("worker " + std::to_string(w));
      });
    } catch (const std::runtime_error& e) {
      caught = std::string(e.what()) == "worker " + std::to_string(failing);
    }
    QVERIFY(caught);
    QCOMPARE(ran.load(), 3);  // every worker ran before the exception came back
  }
  std::atomic<int> after{0};
  pool.run(3, [&](unsigned) { ++after; });
  QCOMPARE(after.load(), 3);
}

// A run from inside a run, and runs from two threads at once, each get all their workers.
void TestUtil::workerPoolTakesNestedAndConcurrentRuns() {
  peat::util::WorkerPool pool;
  std::atomic<int> inner{0};
  pool.run(2, [&](unsigned) { pool.run(3, [&](unsigned) { ++inner; }); });
  QCOMPARE(inner.load(), 6);
  std::atomic<int> total{0};
  auto caller = [&] {
    for (int r = 0; r < 300; ++r) pool.run(2, [&](unsigned) { ++total; });
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  QCOMPARE(total.load(), 1200);
}

// A child forked after the pool ran (its threads are the parent's only) runs its own fork-joins.
void TestUtil::workerPoolStartsAfreshInAForkedChild() {
  peat::util::WorkerPool pool;
  std::atomic<int> ran{0};
  pool.run(3, [&](unsigned) { ++ran; });
  QCOMPARE(ran.load(), 3);
  const pid_t child = ::fork();
  if (child == 0) {
    std::atomic<int> again{0};
    for (int r = 0; r < 50; ++r) pool.run(3, [&](unsigned) { ++again; });
    std::_Exit(again.load() == 150 ? 0 : 1);
  }
  QVERIFY(child > 0);
  int status = 0;
  QCOMPARE(::waitpid(child, &status, 0), child);
  QVERIFY(WIFEXITED(status));
  QCOMPARE(WEXITSTATUS(status), 0);
  pool.run(3, [&](unsigned) { ++ran; });  // the parent's threads go on
  QCOMPARE(ran.load(), 6);
}

void TestUtil::parallelForRunsEveryWorkerOnce() {
  std::vector<std::atomic<int>> runs(5);
  peat::util::parallelFor(5, [&](unsigned w) { ++runs[w]; });
  for (const auto& r : runs) QCOMPARE(r.load(), 1);
  int once = 0;
  peat::util::parallelFor(0, [&](unsigned w) { once += int(w) + 1; });  // at least one worker
  QCOMPARE(once, 1);
}

void TestUtil::parallelForRethrowsAWorkersException() {
  std::atomic<int> finished{0};
  QVERIFY_THROWS_EXCEPTION(std::runtime_error, peat::util::parallelFor(4, [&](unsigned w) {
                             if (w == 2) throw std::runtime_error("worker 2 failed");
                             ++finished;
                           }));
  QCOMPARE(finished.load(), 3);  // the others ran to the end before the rethrow
}

void TestUtil::parallelRangesCoverEachIndexOnce() {
  for (int64_t count : {int64_t(1), int64_t(7), int64_t(1000)}) {
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(count));
    peat::util::parallelRanges(count, 3, [&](int64_t first, int64_t last, unsigned) {
      for (int64_t i = first; i < last; ++i) ++hits[std::size_t(i)];
    });
    for (const auto& h : hits) QCOMPARE(h.load(), 1);
  }
}

void TestUtil::eventLinesAreVersionedJson() {
  peat::events::Event e("point");
  e.add("scheme", "save").add("flips", int64_t(4096)).add("accuracy", 0.5).add("lost", std::nan(""));
  QCOMPARE(peat::events::toJsonLine(e),
           std::string("{\"v\":1,\"event\":\"point\",\"scheme\":\"save\",\"flips\":4096,\"accuracy\":0.5,\"lost\":null}"));
  peat::events::Event quoted("error");
  quoted.add("message", "a \"b\"\nc");
  QCOMPARE(peat::events::toJsonLine(quoted), std::string("{\"v\":1,\"event\":\"error\",\"message\":\"a \\\"b\\\"\\nc\"}"));
}

// What `peat` parses is what the LibTorch module runs: every field survives the text in between.
void TestUtil::torchCommandsRoundTrip() {
  peat::cli::TorchCommand c;
  c.name = "runtime-fi";
  c.commandLine = "peat runtime-fi -k \"a b\"\nline2 \\ end";
  c.seed = 18446744073709551615ull;
  c.learningRate = 0.1;
  c.probability = 1.0 / 3;
  c.noBackward = true;
  c.every = "10,100";
  c.resumeFrom = -1;
  c.shards = 4;
  const peat::cli::TorchCommand d = peat::cli::decode(peat::cli::encode(c));
  QCOMPARE(peat::cli::encode(d), peat::cli::encode(c));
  QCOMPARE(d.commandLine, c.commandLine);
  QCOMPARE(d.seed, c.seed);
  QCOMPARE(d.probability, c.probability);  // exactly: %.17g
  QCOMPARE(d.noBackward, true);
  QCOMPARE(d.resumeFrom, int64_t(-1));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, peat::cli::decode("name=train\n"));  // fields missing
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, peat::cli::decode("no equals sign"));
}

// The spool playback and analyze keep bytes in: what is appended reads back from where append said,
// nothing is left in the directory (the file has no name), and a directory it cannot write in gives
// one error naming the path.
void TestUtil::spoolFileKeepsBytesNamelessly() {
  QTemporaryDir dir;
  const std::string beside = dir.filePath(QStringLiteral("s.h5")).toStdString();
  {
    peat::util::SpoolFile spool(beside);
    std::vector<unsigned char> a(100000), b(7);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<unsigned char>(i * 31);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<unsigned char>(200 + i);
    const uint64_t at = spool.append(a.data(), a.size()), bt = spool.append(b.data(), b.size());
    QCOMPARE(at, uint64_t(0));
    QCOMPARE(bt, uint64_t(a.size()));
    QCOMPARE(spool.size(), uint64_t(a.size() + b.size()));
    std::vector<unsigned char> back(b.size()), front(a.size());
    spool.read(bt, back.data(), back.size());
    spool.read(at, front.data(), front.size());
    QVERIFY(back == b);
    QVERIFY(front == a);
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, spool.read(bt, back.data(), back.size() + 1));  // past the end
    QCOMPARE(QDir(dir.path()).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot).size(), 0);
  }
  peat::util::SpoolFile nowhere(dir.filePath(QStringLiteral("missing/s.h5")).toStdString());
  const unsigned char byte = 1;
  try {
    nowhere.append(&byte, 1);
    QFAIL("a spool was made in a directory that does not exist");
  } catch (const std::runtime_error& e) {
    QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("missing/s.h5")), e.what());
  }
}

QTEST_GUILESS_MAIN(TestUtil)
#include "tst_util.moc"
