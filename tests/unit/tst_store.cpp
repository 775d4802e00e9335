// SPDX-License-Identifier: MIT
// core/store: the session file written, read back, refused when bad, and kept when a writer dies.
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

class TestStore : public QObject {
  Q_OBJECT
 private slots:
  void init();
  void summaryRoundTrip();
  void tensorsRoundTrip();
  void recordsAndVerdictsRoundTrip();
  void packedReportsReadAsTheirOwnRecords();
  void appendedTablesReadAsWrittenOnes();
  void runReadAnIterationAtATime();
  void largeTensorsAreChunkedAndCompressed();
  void walkingALargeSessionHoldsLittle();
  void refusesToOverwrite();
  void rejectsBadNames_data();
  void rejectsBadNames();
  void misuseIsReported();
  void badFiles_data();
  void badFiles();
  void sweepRunFindsItsGoldenTwin();
  void provenanceIsFilledIn();

 private:
  QString path(const char* name) const { return dir_->filePath(QString::fromLatin1(name)); }
  std::unique_ptr<QTemporaryDir> dir_;
};

void TestStore::init() {
  dir_ = std::make_unique<QTemporaryDir>();
  QVERIFY(dir_->isValid());
}

void TestStore::summaryRoundTrip() {
  const std::string p = path("s.h5").toStdString();
  testsupport::writeSampleSession(p);
  SessionReader r(p);
  const SessionSummary s = r.summary();
  QCOMPARE(s.schemaVersion, kSchemaVersion);
  QCOMPARE(s.provenance.seed, int64_t(42));
  QCOMPARE(s.provenance.model, std::string("format-sample"));
  QCOMPARE(s.runs.size(), std::size_t(1));
  const RunInfo& run = s.runs[0];
  QCOMPARE(run.name, std::string("golden"));
  QCOMPARE(run.status, std::string("complete"));
  QCOMPARE(run.iterations.size(), std::size_t(3));
  QCOMPARE(run.completeIterations(), int64_t(3));
  QCOMPARE(run.callCount(), int64_t(12));
  QCOMPARE(run.checkpoints, std::vector<int64_t>{2});
  QCOMPARE(run.reports, std::vector<std::string>{"call-000001-000002"});
  QCOMPARE(run.verdictCount, int64_t(2));
  const CallInfo& call = run.iterations[1].calls[3];
  QCOMPARE(call.id.layer, std::string("fc3"));
  QCOMPARE(call.id.op, std::string("relu"));
  QCOMPARE(call.id.phase, Phase::Backward);
  QCOMPARE(call.id.iteration, int64_t(1));
  QCOMPARE(call.path, std::string("iterations/000001/calls/000003"));
  QCOMPARE(call.tensors.size(), std::size_t(5));
  // tensors come in name order
  QStringList names;
  for (const TensorInfo& t : call.tensors) names << QString::fromStdString(t.name);
  QCOMPARE(names.join(QLatin1Char(',')), QStringLiteral("input_0,labels,output,output_bf16,output_fp16"));
  QCOMPARE(call.tensors[0].shape, (std::vector<uint64_t>{64, 128}));
  QCOMPARE(call.tensors[1].dtype, std::string("int64"));
  QCOMPARE(call.tensors[3].dtype, std::string("bfloat16"));
  QCOMPARE(call.tensors[4].dtype, std::string("float16"));
  QCOMPARE(s.saveResults, std::vector<std::string>{"fc0-bits"});

  // the runs' headers alone, and one run whole, read as the summary reads them
  const SessionSummary headers = r.summaryWithoutCalls();
  QCOMPARE(headers.runs.size(), std::size_t(1));
  QVERIFY(headers.runs[0].iterations.empty());
  QCOMPARE(headers.runs[0].checkpoints, run.checkpoints);
  QCOMPARE(headers.runs[0].reports, run.reports);
  QCOMPARE(headers.runs[0].attributes, run.attributes);
  QCOMPARE(headers.runs[0].status, run.status);
  const RunInfo whole = r.run("golden");
  QCOMPARE(whole.callCount(), run.callCount());
  QCOMPARE(whole.iterations.size(), run.iterations.size());
  for (std::size_t i = 0; i < run.iterations.size(); ++i) {
    QCOMPARE(whole.iterations[i].complete, run.iterations[i].complete);
    for (std::size_t c = 0; c < run.iterations[i].calls.size(); ++c) {
      const CallInfo &a = whole.iterations[i].calls[c], &b = run.iterations[i].calls[c];
      QCOMPARE(a.path, b.path);
      QCOMPARE(a.id.op, b.id.op);
      QCOMPARE(a.params, b.params);
      QCOMPARE(a.tensors.size(), b.tensors.size());
      for (std::size_t t = 0; t < b.tensors.size(); ++t) QCOMPARE(a.tensors[t].shape, b.tensors[t].shape);
    }
  }
  QVERIFY_THROWS_EXCEPTION(SessionError, r.run("nope"));
}

void TestStore::tensorsRoundTrip() {
  const std::string p = path("s.h5").toStdString();
  testsupport::writeSampleSession(p);
  SessionReader r(p);
  const Tensor in = r.readTensor("golden", "iterations/000002/calls/000001", "input_0");
  QCOMPARE(in.dtype, DType::F32);
  QCOMPARE(in.elementCount(), uint64_t(64 * 128));
  const auto* f = reinterpret_cast<const float*>(in.bytes.data());
  for (long i = 0; i < 64 * 128; ++i) QCOMPARE(f[i], testsupport::sampleValue(21, i));

  const Tensor half = r.readTensor("golden", "iterations/000002/calls/000001", "output_fp16");
  QCOMPARE(half.dtype, DType::F16);
  const auto* h = reinterpret_cast<const uint16_t*>(half.bytes.data());
  for (long i = 0; i < 64 * 32; ++i) QCOMPARE(uint32_t(h[i]), fp::encode(fp::kFp16, testsupport::sampleValue(121, i)));

  const Tensor bf = r.readTensor("golden", "iterations/000002/calls/000001", "output_bf16");
  QCOMPARE(bf.dtype, DType::BF16);
  const auto* b = reinterpret_cast<const uint16_t*>(bf.bytes.data());
  QCOMPARE(uint32_t(b[5]), fp::encode(fp::kBf16, testsupport::sampleValue(121, 5)));

  const Tensor labels = r.readTensor("golden", "iterations/000000/calls/000002", "labels");
  QCOMPARE(labels.dtype, DType::I64);
  QCOMPARE(reinterpret_cast<const int64_t*>(labels.bytes.data())[0], int64_t(2));

  QVERIFY_THROWS_EXCEPTION(SessionError, r.readTensor("golden", "iterations/000000/calls/000002", "nope"));
}

void TestStore::recordsAndVerdictsRoundTrip() {
  const std::string p = path("s.h5").toStdString();
  testsupport::writeSampleSession(p);
  SessionReader r(p);
  const std::vector<Verdict> v = r.verdicts("golden");
  QCOMPARE(v.size(), std::size_t(2));
  QCOMPARE(v[0].model, std::string("precision_loss"));
  QCOMPARE(v[1].confidence, 0.75);
  QCOMPARE(v[1].evidence, std::string("one element, bit 27"));
  // findings: the verdict's evidence as fields, then its alternatives; none for the older row
  QVERIFY(v[0].findings.empty());
  QCOMPARE(v[1].findings.size(), std::size_t(2));
  QCOMPARE(v[1].findings[0].model, std::string("bit_flip"));
  QCOMPARE(v[1].findings[0].numbers.at("bit"), 27.0);
  QCOMPARE(v[1].findings[0].numbers.at("elements"), 1.0);
  QCOMPARE(v[1].findings[0].labels.at("format"), std::string("fp32"));
  QCOMPARE(v[1].findings[1].model, std::string("accumulation_order"));
  QCOMPARE(v[1].findings[1].confidence, 0.5);
  QVERIFY(v[1].findings[1].numbers.empty() && v[1].findings[1].labels.empty());
  const StoredRecord rep = r.report("golden", "call-000001-000002");
  QCOMPARE(rep.scalars.at("abs_error_max"), 0.125);
  QCOMPARE(rep.labels.at("candidate"), std::string("fp16_inputs"));
  const Tensor& hist = rep.arrays.at("log2_abs_error_hist");
  QCOMPARE(hist.dtype, DType::F64);
  QCOMPARE(reinterpret_cast<const double*>(hist.bytes.data())[3], 40.0);
  const StoredRecord save = r.saveResult("fc0-bits");
  QCOMPARE(save.labels.at("layer"), std::string("fc0"));
  QCOMPARE(save.arrays.at("bit_class").shape, (std::vector<uint64_t>{2, 3}));
}

namespace {
// A ResultRecord as it reads back, for comparing with what a reader returns.
StoredRecord asStored(const ResultRecord& r) {
  StoredRecord out{r.scalars, r.labels, {}};
  for (const NamedTensor& t : r.arrays) {
    const auto* b = static_cast<const unsigned char*>(t.view.data);
    out.arrays[t.name] = Tensor{t.view.dtype, t.view.shape,
                                std::vector<unsigned char>(b, b + t.view.elementCount() * h5::typeSize(t.view.dtype))};
  }
  return out;
}

bool sameRecord(const StoredRecord& a, const StoredRecord& b) {
  if (a.labels != b.labels || a.arrays.size() != b.arrays.size() || a.scalars.size() != b.scalars.size()) return false;
  for (const auto& [k, v] : a.scalars)  // NaN reads back as NaN
    if (!b.scalars.count(k) || !(b.scalars.at(k) == v || (std::isnan(v) && std::isnan(b.scalars.at(k))))) return false;
  for (const auto& [k, t] : a.arrays) {
    const auto it = b.arrays.find(k);
    if (it == b.arrays.end() || it->second.dtype != t.dtype || it->second.shape != t.shape || it->second.bytes != t.bytes)
      return false;
  }
  return true;
}
}  // namespace

// A run's table and verdicts written a block of rows at a time (analyze --session, whose memory
// must not grow with the calls) read back as the same tables written whole: blocks across the
// 1,024-row chunks, an empty block, verdicts with and without findings; rows with other columns
// are refused and leave the table as it was.
void TestStore::appendedTablesReadAsWrittenOnes() {
  const std::string p = path("appended.h5").toStdString();
  std::vector<Verdict> verdicts;
  std::vector<h5::Column> table{{"call", true, {}, {}}, {"max_abs", false, {}, {}}};
  for (int i = 0; i < 2500; ++i) {
    const std::string call = "iterations/" + std::to_string(i / 14) + "/calls/" + std::to_string(i % 14);
    Verdict v{call, i % 3 ? "precision_loss" : "bit_flip", 0.5 + i * 1e-4, "line " + std::to_string(i), {}};
    if (i % 5 == 0) v.findings = {{"bit_flip", 0.9, {{"bit", double(i % 32)}, {"elements", 1}}, {{"format", "fp32"}}},
                                  {"unknown", 0.1, {}, {}}};
    verdicts.push_back(v);
    table[0].text.push_back(call);
    table[1].numbers.push_back(i * 0.25);
  }
  const auto slice = [](const std::vector<h5::Column>& t, std::size_t from, std::size_t to) {
    std::vector<h5::Column> out = t;
    for (h5::Column& c : out) {
      if (c.isText) c.text.assign(c.text.begin() + long(from), c.text.begin() + long(to));
      else c.numbers.assign(c.numbers.begin() + long(from), c.numbers.begin() + long(to));
    }
    return out;
  };
  {
    SessionWriter w(p, {});
    w.beginRun({"whole", "analysis", "", ""});
    w.writeVerdicts(verdicts);
    w.writeTable("call_reports", table);
    w.endRun(RunStatus::Complete);
    w.beginRun({"appended", "analysis", "", ""});
    for (auto [from, to] : {std::pair<std::size_t, std::size_t>{0, 700}, {700, 700}, {700, 1900}, {1900, 2500}}) {
      w.appendVerdicts({verdicts.begin() + long(from), verdicts.begin() + long(to)});
      w.appendTable("call_reports", slice(table, from, to));
    }
    std::vector<h5::Column> other = slice(table, 0, 1);
    other[1].name = "mean_abs";
    QVERIFY_THROWS_EXCEPTION(h5::Error, w.appendTable("call_reports", other));
    w.endRun(RunStatus::Complete);
  }
  SessionReader r(p);
  const std::vector<Verdict> whole = r.verdicts("whole"), appended = r.verdicts("appended");
  QCOMPARE(appended.size(), std::size_t(2500));
  QCOMPARE(whole.size(), appended.size());
  for (std::size_t i = 0; i < whole.size(); ++i) {
    QCOMPARE(appended[i].call, whole[i].call);
    QCOMPARE(appended[i].model, whole[i].model);
    QCOMPARE(appended[i].confidence, whole[i].confidence);
    QCOMPARE(appended[i].evidence, whole[i].evidence);
    QCOMPARE(appended[i].findings.size(), whole[i].findings.size());
    for (std::size_t k = 0; k < whole[i].findings.size(); ++k) {
      QCOMPARE(appended[i].findings[k].model, whole[i].findings[k].model);
      QCOMPARE(appended[i].findings[k].numbers, whole[i].findings[k].numbers);
      QCOMPARE(appended[i].findings[k].labels, whole[i].findings[k].labels);
    }
  }
  QCOMPARE(whole[5].findings[0].numbers.at("bit"), 5.0);
  const std::vector<h5::Column> a = r.table("appended", "call_reports"), b = r.table("whole", "call_reports");
  QCOMPARE(a.size(), std::size_t(2));
  QCOMPARE(a[0].text, table[0].text);
  QCOMPARE(a[1].numbers, table[1].numbers);
  QCOMPARE(b[0].text, a[0].text);
  QVERIFY(r.verify().readWhole >= 6);  // the appended tables are decoded as whole ones are
}

// A run read an iteration at a time (analyze --session, so that its memory does not grow with the
// run) gives the iterations and calls the whole run gives; a missing run or iteration is one
// SessionError.
void TestStore::runReadAnIterationAtATime() {
  const std::string p = path("s.h5").toStdString();
  testsupport::writeSampleSession(p);
  {  // a run without calls beside it: its index is empty
    SessionWriter w(p, {}, WriteMode::Append);
    w.beginRun({"no-calls", "save_campaign", "golden", "a run without iterations"});
    w.endRun(RunStatus::Complete);
  }
  SessionReader r(p);
  int withCalls = 0, without = 0;
  for (const RunInfo& whole : r.summary().runs) {
    if (whole.iterations.empty()) {
      ++without;
      QVERIFY(r.iterationIndex(whole.name).empty());
      QVERIFY_THROWS_EXCEPTION(SessionError, r.iteration(whole.name, "000000"));
      continue;
    }
    ++withCalls;
    const std::vector<SessionReader::IterationEntry> index = r.iterationIndex(whole.name);
    QCOMPARE(index.size(), whole.iterations.size());
    for (std::size_t i = 0; i < index.size(); ++i) {
      const IterationInfo one = r.iteration(whole.name, index[i].name);
      const IterationInfo& expected = whole.iterations[i];
      QCOMPARE(index[i].calls, int64_t(expected.calls.size()));
      QCOMPARE(index[i].complete, expected.complete);
      QCOMPARE(one.iteration, expected.iteration);
      QCOMPARE(one.complete, expected.complete);
      QCOMPARE(one.calls.size(), expected.calls.size());
      for (std::size_t c = 0; c < one.calls.size(); ++c) {
        QCOMPARE(one.calls[c].path, expected.calls[c].path);
        QCOMPARE(one.calls[c].id.op, expected.calls[c].id.op);
        QCOMPARE(one.calls[c].params, expected.calls[c].params);
        QCOMPARE(one.calls[c].tensors.size(), expected.calls[c].tensors.size());
        for (std::size_t t = 0; t < one.calls[c].tensors.size(); ++t)
          QVERIFY(one.calls[c].tensors[t].name == expected.calls[c].tensors[t].name &&
                  one.calls[c].tensors[t].shape == expected.calls[c].tensors[t].shape);
      }
      // without the tensor lists (playback's choice of calls): the same calls and parameters
      const IterationInfo ids = r.iteration(whole.name, index[i].name, false);
      QCOMPARE(ids.calls.size(), expected.calls.size());
      for (std::size_t c = 0; c < ids.calls.size(); ++c) {
        QVERIFY(ids.calls[c].tensors.empty());
        QVERIFY(!expected.calls[c].tensors.empty());
        QCOMPARE(ids.calls[c].path, expected.calls[c].path);
        QCOMPARE(ids.calls[c].params, expected.calls[c].params);
      }
    }
  }
  QCOMPARE(withCalls, 1);
  QCOMPARE(without, 1);
  // walked an iteration at a time (the probe's structure walk): the iterations run() reads
  for (const RunInfo& whole : r.summary().runs) {
    std::size_t seen = 0;
    r.forEachIteration(whole.name, true, [&](const IterationInfo& it) {
      QVERIFY(seen < whole.iterations.size());
      QCOMPARE(it.iteration, whole.iterations[seen].iteration);
      QCOMPARE(it.complete, whole.iterations[seen].complete);
      QCOMPARE(it.calls.size(), whole.iterations[seen].calls.size());
      for (std::size_t c = 0; c < it.calls.size(); ++c) QCOMPARE(it.calls[c].tensors.size(), whole.iterations[seen].calls[c].tensors.size());
      ++seen;
    });
    QCOMPARE(seen, whole.iterations.size());
  }
  QVERIFY_THROWS_EXCEPTION(SessionError, r.forEachIteration("no-such-run", false, [](const IterationInfo&) {}));
  QVERIFY_THROWS_EXCEPTION(SessionError, r.iterationIndex("no-such-run"));
  QVERIFY_THROWS_EXCEPTION(SessionError, r.iteration("golden", "999999"));
}

// Reports packed 64 to a record (analyze --session) read back as the records they were: every
// scalar, label and array (type and shape) of each row, rows with parts the others lack, and the
// records a pack cannot hold stored as their own beside it; a crafted pack gives one SessionError.
void TestStore::packedReportsReadAsTheirOwnRecords() {
  const std::vector<uint64_t> hist0{1, 2, 3}, hist1{4, 5, 6, 7}, hist5{9};
  const std::vector<double> grid0{0.5, -1, 2, 3, 4, 1e300}, one{42};
  const std::vector<float> wrongType{1.0f};
  std::vector<ResultRecord> records(6);
  records[0] = {{{"elements", 6}, {"max_abs", std::nan("")}}, {{"call", "c0"}, {"verdict", "exact"}},
                {{"hist", {DType::U64, {3}, hist0.data()}}, {"grid", {DType::F64, {2, 3}, grid0.data()}}}};
  records[1] = {{{"elements", 7}, {"rule_candidate_error", 0.25}},  // max_abs absent, a scalar the others lack
                {{"call", "c1"}, {"verdict", "bit_flip"}, {"rule_reference", "golden, with, commas"}},
                {{"hist", {DType::U64, {4}, hist1.data()}}, {"empty", {DType::U64, {0}, hist1.data()}}}};
  records[2] = {{}, {{"call", ""}}, {{"scalar", {DType::F64, {}, one.data()}}}};  // no scalars, an empty label
  records[3] = {{{"elements", 1}}, {{"call", "two\nlines"}}, {}};                 // a label no pack holds
  records[4] = {{{"elements", 1}}, {{"call", "c4"}}, {{"hist", {DType::F32, {1}, wrongType.data()}}}};  // another type
  records[5] = {{{"elements", 1}}, {{"call", "c5"}}, {{"hist", {DType::U64, {1}, hist5.data()}}}};
  const std::vector<std::string> ids{"call-000000-000000", "call-000000-000001", "call-000000-000002",
                                     "call-000000-000003", "call-000001-000000", "call-000001-000001"};
  const std::string p = path("packed.h5").toStdString();
  std::vector<std::string> own;
  {
    SessionWriter w(p, {});
    w.beginRun({"analysis-x", "analysis", "", "packed reports"});
    RecordPacker packer;
    for (std::size_t k = 0; k < 5; ++k)
      if (!packer.add(ids[k], records[k])) w.writeReport(ids[k], records[k]), own.push_back(ids[k]);
    QCOMPARE(packer.size(), std::size_t(3));
    w.writeReport(packer.firstId() + kPackSuffix, packer.record());
    packer.clear();
    QVERIFY(packer.add(ids[5], records[5]));  // a pack of one
    w.writeReport(packer.firstId() + kPackSuffix, packer.record());
    w.endRun(RunStatus::Complete);
  }
  QCOMPARE(own, (std::vector<std::string>{ids[3], ids[4]}));
  SessionReader r(p);
  std::vector<std::string> listed = r.summary().runs.front().reports;
  std::sort(listed.begin(), listed.end());
  QCOMPARE(listed, ids);
  const std::vector<std::pair<std::string, StoredRecord>> all = r.reports("analysis-x");
  QCOMPARE(all.size(), ids.size());
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const StoredRecord expected = asStored(records[k]);
    QVERIFY2(sameRecord(r.report("analysis-x", ids[k]), expected), ids[k].c_str());
    const auto it = std::find_if(all.begin(), all.end(), [&](const auto& e) { return e.first == ids[k]; });
    QVERIFY(it != all.end() && sameRecord(it->second, expected));
  }
  QVERIFY(r.verify().datasets > 0);  // the packs' datasets carry checksums like any other
  try {
    (void)r.report("analysis-x", "call-000009-000000");
    QFAIL("a report the run does not hold was read");
  } catch (const SessionError& e) {
    QVERIFY(std::string(e.what()).find("has no report 'call-000009-000000'") != std::string::npos);
  }

  // crafted packs: each malformed part is refused before any row is cut out
  RecordPacker packer;
  for (std::size_t k : {0, 1, 2}) QVERIFY(packer.add(ids[k], records[k]));
  const StoredRecord good = asStored(packer.record());
  QCOMPARE(unpackRecords(good, "t").size(), std::size_t(3));
  const auto i64 = [](StoredRecord& rec, const char* name) { return reinterpret_cast<int64_t*>(rec.arrays.at(name).bytes.data()); };
  const std::vector<std::pair<const char*, std::function<void(StoredRecord&)>>> crafted{
      {"offsets that do not cover", [&](StoredRecord& c) { i64(c, "offsets")[0] = 1; }},
      {"offsets that disagree", [&](StoredRecord& c) { i64(c, "offsets")[6] = 2; }},  // row 0's hist cut short
      {"rank 3", [&](StoredRecord& c) { i64(c, "dims")[0] = 3; }},
      {"twice", [](StoredRecord& c) { c.labels["ids"] = "a\nb\na"; }},
      {"another number of rows", [](StoredRecord& c) { c.labels["label.call"] = "c0\nc1"; }},
      {"another type or size", [](StoredRecord& c) { c.arrays.at("scalars").shape = {1}; }},
      {"has no array.hist", [](StoredRecord& c) { c.arrays.erase("array.hist"); }},
      {"malformed scalar_names", [](StoredRecord& c) { c.labels["scalar_names"] = "elements,,max_abs"; }},
      {"is no packed record", [](StoredRecord& c) { c.labels["kind"] = "report"; }},
  };
  for (const auto& [what, craft] : crafted) {
    StoredRecord c = good;
    craft(c);
    try {
      (void)unpackRecords(c, "'t'");
      QFAIL(what);
    } catch (const SessionError& e) {
      QVERIFY2(std::string(e.what()).find(what) != std::string::npos, e.what());
    }
  }
}

void TestStore::largeTensorsAreChunkedAndCompressed() {
  const std::string p = path("s.h5").toStdString();
  testsupport::writeSampleSession(p);
  const h5::Lock lock;
  h5::File f(lock, p, h5::File::Mode::ReadOnly);
  h5::Dataset ds = f.root().openGroup("runs").openGroup("golden").openGroup("iterations").openGroup("000000")
                       .openGroup("calls").openGroup("000000").openDataset("input_0");
  const hid_t dcpl = H5Dget_create_plist(ds.id());
  QCOMPARE(H5Pget_layout(dcpl), H5D_CHUNKED);
  const int filters = H5Pget_nfilters(dcpl);
  QCOMPARE(filters, 2);
  unsigned flags = 0, values[8];
  size_t n = 8;
  QCOMPARE(H5Pget_filter2(dcpl, 0, &flags, &n, values, 0, nullptr, nullptr), H5Z_FILTER_SHUFFLE);
  n = 8;
  QCOMPARE(H5Pget_filter2(dcpl, 1, &flags, &n, values, 0, nullptr, nullptr), H5Z_FILTER_DEFLATE);
  H5Pclose(dcpl);
}

// A reader's memory must not grow with the session: HDF5's metadata cache grew to 32 MB of on-disk
// metadata, held decoded at about ten times that (400 MB for a walk of a session of 4,200 LeNet calls
// and four stored runs). 6,000 calls of four tensors each: the walk's heap, the summary itself
// included, stays under 48 MB (24 MB with the cache kept at 2 MB, 403 MB with the library's
// default configuration).
void TestStore::walkingALargeSessionHoldsLittle() {
  const std::string p = path("large.h5").toStdString();
  {
    SessionWriter w(p, {});
    w.beginRun({"golden", "profile", "golden", ""});
    std::vector<float> values(4096, 1.0f);
    for (int64_t it = 0; it < 100; ++it) {
      w.beginIteration(it);
      for (int64_t c = 0; c < 60; ++c) {
        const TensorView v{DType::F32, {64, 64}, values.data()};
        w.recordCall({"fc" + std::to_string(c % 4), "linear", Phase::Forward, it, c},
                     {{"input_0", v}, {"input_1", v}, {"input_2", v}, {"output", v}}, {{"bias", 1}});
      }
      w.endIteration();
    }
    w.endRun(RunStatus::Complete);
  }
  SessionReader r(p);
  const auto heap = [] {
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
  };
  const std::size_t before = heap();
  std::size_t peak = before;
  {
    const SessionSummary s = r.summary();
    QCOMPARE(s.runs.at(0).callCount(), int64_t(6000));
    peak = std::max(peak, heap());
  }
  const double grown = double(peak - before) / double(1 << 20);
  qInfo("the walk of 6,000 calls held %.1f MB of heap", grown);
  QVERIFY2(grown < 48, qPrintable(QStringLiteral("%1 MB").arg(grown)));
}

void TestStore::refusesToOverwrite() {
  const std::string p = path("s.h5").toStdString();
  testsupport::writeSampleSession(p);
  try {
    SessionWriter w(p, {});
    QFAIL("an existing session was replaced");
  } catch (const SessionError& e) {
    QVERIFY(QString::fromStdString(e.what()).contains(QStringLiteral("already exists")));
  }
  QCOMPARE(SessionReader(p).summary().runs.size(), std::size_t(1));  // untouched
}

void TestStore::rejectsBadNames_data() {
  QTest::addColumn<QString>("run");
  QTest::addColumn<QString>("tensor");
  QTest::newRow("slash in run") << "a/b" << "x";
  QTest::newRow("empty run") << "" << "x";
  QTest::newRow("dot-dot run") << ".." << "x";
  QTest::newRow("space in tensor") << "ok" << "bad name";
  QTest::newRow("slash in tensor") << "ok" << "../x";
}

void TestStore::rejectsBadNames() {
  QFETCH(QString, run);
  QFETCH(QString, tensor);
  SessionWriter w(path("n.h5").toStdString(), {});
  const float v = 1;
  auto write = [&] {
    w.beginRun({run.toStdString(), "profile", "golden", ""});
    w.beginIteration(0);
    w.recordCall({"l", "relu", Phase::Forward, 0, 0}, {{tensor.toStdString(), {DType::F32, {1}, &v}}});
  };
  QVERIFY_THROWS_EXCEPTION(SessionError, write());
}

void TestStore::misuseIsReported() {
  SessionWriter w(path("m.h5").toStdString(), {});
  QVERIFY_THROWS_EXCEPTION(SessionError, w.beginIteration(0));  // no run
  w.beginRun({"r", "profile", "golden", ""});
  QVERIFY_THROWS_EXCEPTION(SessionError, w.beginRun({"r2", "profile", "golden", ""}));  // still open
  QVERIFY_THROWS_EXCEPTION(SessionError, w.recordCall({"l", "relu", Phase::Forward, 0, 0}, {}));  // no iteration
  w.beginIteration(0);
  QVERIFY_THROWS_EXCEPTION(SessionError, w.recordCall({"l", "relu", Phase::Forward, 5, 0}, {}));  // wrong iteration
  w.recordCall({"l", "relu", Phase::Forward, 0, 0}, {});
  QVERIFY_THROWS_EXCEPTION(SessionError, w.recordCall({"l", "relu", Phase::Forward, 0, 0}, {}));  // duplicate
  w.endIteration();
  QVERIFY_THROWS_EXCEPTION(SessionError, w.beginIteration(0));  // recorded already
  w.endRun(RunStatus::Complete);
  QVERIFY_THROWS_EXCEPTION(SessionError, w.beginRun({"r", "profile", "golden", ""}));  // name taken
}

void TestStore::badFiles_data() {
  QTest::addColumn<QString>("kind");
  QTest::addColumn<QString>("message");
  QTest::newRow("missing") << "missing" << "No such file or directory";
  QTest::newRow("directory") << "directory" << "is a directory";
  QTest::newRow("text") << "text" << "is not an HDF5 file";
  QTest::newRow("empty") << "empty" << "is not an HDF5 file";
  QTest::newRow("foreign") << "foreign" << "not a PEAT session";
  QTest::newRow("future") << "future" << "newer than the version 1";
  QTest::newRow("truncated") << "truncated" << "truncated or damaged";
}

void TestStore::badFiles() {
  QFETCH(QString, kind);
  QFETCH(QString, message);
  const std::string p = path("bad").toStdString();
  if (kind == QLatin1String("directory")) QVERIFY(QDir(dir_->path()).mkdir(QStringLiteral("bad")));
  if (kind == QLatin1String("text") || kind == QLatin1String("empty")) {
    QFile f(QString::fromStdString(p));
    QVERIFY(f.open(QIODevice::WriteOnly));
    if (kind == QLatin1String("text")) f.write("hello, not hdf5\n");
  }
  if (kind == QLatin1String("foreign")) testsupport::writeForeignHdf5(p);
  if (kind == QLatin1String("future")) testsupport::writeFutureSession(p);
  if (kind == QLatin1String("truncated")) {
    testsupport::writeSampleSession(path("whole.h5").toStdString());
    testsupport::writeTruncatedCopy(path("whole.h5").toStdString(), p, 0.5);
  }
  try {
    SessionReader r(p);
    r.summary();
    QFAIL("a bad file was accepted");
  } catch (const SessionError& e) {
    const QString what = QString::fromStdString(e.what());
    QVERIFY2(what.contains(message), qPrintable(what));
    QVERIFY2(!what.contains(QLatin1Char('\n')), "error messages are one line");
  }
}

// A runtime-FI sweep holds a golden run per seed: each FI run's curve is paired with the golden
// run it names ("golden_run"), not with whichever golden run comes last.
void TestStore::sweepRunFindsItsGoldenTwin() {
  const std::string p = path("sweep.h5").toStdString();
  {
    SessionWriter w(p, {});
    auto curve = [&](double loss) {
      std::vector<h5::Column> c(2);
      c[0].name = "iteration", c[0].numbers = {0, 1};
      c[1].name = "loss", c[1].numbers = {loss, loss / 2};
      w.writeTable("curve", c);
    };
    for (const char* seed : {"1", "2"}) {
      w.beginRun({std::string("golden-seed-") + seed, "runtime_fi_golden", "golden", ""});
      curve(seed[0] == '1' ? 1.0 : 2.0);
      w.endRun(RunStatus::Complete);
    }
    w.beginRun({"runtime-fi-bitflip-every-10-seed-1", "runtime_fi", "bitflip", ""});
    w.setRunAttribute("golden_run", "golden-seed-1");
    curve(1.5);
    w.endRun(RunStatus::Complete);
  }
  const SessionReader r(p);
  const TrainingCurve c = loadTrainingCurve(r, "runtime-fi-bitflip-every-10-seed-1");
  QCOMPARE(c.goldenRun, std::string("golden-seed-1"));
  QCOMPARE(loadTrainingCurve(r, c.goldenRun).loss.front(), 1.0);
}

void TestStore::provenanceIsFilledIn() {
  const std::string p = path("p.h5").toStdString();
  { SessionWriter w(p, {}); }
  const Provenance v = SessionReader(p).summary().provenance;
  QVERIFY(!v.toolVersion.empty());
  QVERIFY(!v.gitCommit.empty());
  QVERIFY(QString::fromStdString(v.hdf5Version).startsWith(QStringLiteral("1.")));
  QVERIFY(QRegularExpression(QStringLiteral("^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ$"))
              .match(QString::fromStdString(v.date))
              .hasMatch());
  QVERIFY(!v.hostname.empty());
}

QTEST_GUILESS_MAIN(TestStore)
#include "tst_store.moc"
