// SPDX-License-Identifier: MIT
#include <iomanip>
#include <iostream>
#include <sstream>
#include <vector>

#include "app/peat/commands.h"
#include "app/peat/text.h"
#include "core/store/session.h"
#include "core/util/json_writer.h"
#include "core/util/text.h"

namespace peat::cli {
namespace {

// Every string from the file is printed through util::printable: a run name or attribute holding
// escape sequences could otherwise retitle, recolour or clear the terminal.
std::string safe(const std::string& s) { return util::printable(s); }
std::string orDash(const std::string& s) { return s.empty() ? "-" : safe(s); }

void printText(const store::SessionSummary& s, bool listCalls) {
  const store::Provenance& p = s.provenance;
  auto row = [](const char* label, const std::string& value) {
    std::cout << std::left << std::setw(11) << label << value << '\n';  // values pass orDash or safe
  };
  row("session", safe(s.path));
  row("schema", std::to_string(s.schemaVersion) + " (" + store::kFormatTag + ")");
  row("created", orDash(s.created));
  row("tool", "peat " + orDash(p.toolVersion) + " (commit " + orDash(p.gitCommit) + ")");
  row("seed", std::to_string(p.seed));
  row("model", orDash(p.model));
  row("dataset", orDash(p.dataset));
  row("backend", orDash(p.backend) + " on " + orDash(p.device));
  row("versions", "LibTorch " + orDash(p.libtorchVersion) + ", HDF5 " + orDash(p.hdf5Version));
  row("host", orDash(p.hostname));
  row("command", orDash(p.commandLine));
  row("runs", std::to_string(s.runs.size()));
  for (const store::RunInfo& r : s.runs) {
    std::cout << "  " << safe(r.name) << ": " << orDash(r.spec.kind) << ", kernel " << orDash(r.spec.kernel) << ", "
              << orDash(r.status) << "; " << r.completeIterations() << '/' << r.iterations.size()
              << " iterations complete, " << r.callCount() << " calls, " << r.checkpoints.size() << " checkpoints, "
              << r.reports.size() << " reports, " << r.verdictCount << " verdicts\n";
    if (!r.tables.empty()) {
      std::cout << "    tables:";
      for (const std::string& t : r.tables) std::cout << ' ' << safe(t);
      std::cout << '\n';
    }
    if (const auto failed = r.attributes.find("kernel_failures"); failed != r.attributes.end())
      std::cout << "    kernel failed " << safe(failed->second) << " (outcomes in call_errors)\n";
    for (const store::IterationInfo& it : r.iterations) {
      if (!it.complete) std::cout << "    iteration " << it.iteration << " is incomplete (writer stopped)\n";
      if (!listCalls) continue;
      for (const store::CallInfo& c : it.calls) {
        std::cout << "    " << safe(c.path) << "  " << safe(c.id.layer) << ' ' << safe(c.id.op) << ' '
                  << store::phaseName(c.id.phase);
        for (const store::TensorInfo& t : c.tensors)
          std::cout << "  " << safe(t.name) << ':' << safe(t.dtype) << shapeText(t.shape);
        std::cout << '\n';
      }
    }
  }
  row("save", std::to_string(s.saveResults.size()) + " results");
  // SAVE analyses write one summary and one record per layer ("<id>.<layer>"), or one record that
  // packs several layers ("<id>.packed-layers"): list the summaries.
  for (const std::string& id : s.saveResults) {
    if (id.find('.') != std::string::npos) continue;
    const std::size_t layers = s.saveLayersOf(id).size();
    std::cout << "  " << safe(id);
    if (layers) std::cout << " (" << layers << " layers)";
    std::cout << '\n';
  }
}

void printJson(const store::SessionSummary& s, bool listCalls) {
  JsonWriter j(std::cout);
  const store::Provenance& p = s.provenance;
  j.beginObject();
  j.field("path", s.path).field("format", store::kFormatTag).field("schema_version", s.schemaVersion);
  j.field("created", s.created);
  j.key("provenance").beginObject();
  j.field("tool_version", p.toolVersion).field("git_commit", p.gitCommit).field("seed", p.seed);
  j.field("model", p.model).field("dataset", p.dataset).field("backend", p.backend).field("device", p.device);
  j.field("libtorch_version", p.libtorchVersion).field("hdf5_version", p.hdf5Version).field("date", p.date);
  j.field("command_line", p.commandLine).field("hostname", p.hostname);
  j.endObject();
  j.key("runs").beginArray();
  for (const store::RunInfo& r : s.runs) {
    j.beginObject();
    j.field("name", r.name).field("kind", r.spec.kind).field("kernel", r.spec.kernel).field("status", r.status);
    j.field("started", r.started).field("finished", r.finished);
    j.field("iterations", int64_t(r.iterations.size())).field("iterations_complete", r.completeIterations());
    j.field("calls", r.callCount()).field("verdicts", r.verdictCount);
    j.key("checkpoints").beginArray();
    for (int64_t c : r.checkpoints) j.value(c);
    j.endArray();
    j.key("reports").beginArray();
    for (const std::string& id : r.reports) j.value(id);
    j.endArray();
    j.key("tables").beginArray();
    for (const std::string& t : r.tables) j.value(t);
    j.endArray();
    j.key("attributes").beginObject();
    for (const auto& [key, value] : r.attributes) j.field(key, value);
    j.endObject();
    if (listCalls) {
      j.key("call_list").beginArray();
      for (const store::IterationInfo& it : r.iterations)
        for (const store::CallInfo& c : it.calls) {
          j.beginObject().field("path", c.path).field("layer", c.id.layer).field("op", c.id.op);
          j.field("phase", store::phaseName(c.id.phase)).field("iteration", c.id.iteration);
          j.field("call_index", c.id.callIndex).field("complete", it.complete);
          j.key("tensors").beginArray();
          for (const store::TensorInfo& t : c.tensors) {
            j.beginObject().field("name", t.name).field("dtype", t.dtype).key("shape").beginArray();
            for (uint64_t d : t.shape) j.value(d);
            j.endArray().endObject();
          }
          j.endArray().endObject();
        }
      j.endArray();
    }
    j.endObject();
  }
  j.endArray();
  j.key("save_results").beginArray();
  for (const std::string& id : s.saveResults) j.value(id);
  j.endArray();
  j.endObject();
  std::cout << '\n';
}

}  // namespace

int runInfo(const InfoOptions& o) {
  // --verify reads every dataset in the helper first (its counts are printed); the reader probes
  // the file itself (core/store/probe.h), so a plain info starts one helper, not two
  const store::SessionReader::Verification v =
      o.verify ? store::probeSession(o.path, true) : store::SessionReader::Verification{};
  store::SessionReader reader(o.path);
  if (o.verify) {
    // only each run's complete iterations are printed: counted from the runs' iteration indexes,
    // so the read pass's memory does not grow with the calls
    const store::SessionSummary s = reader.summaryWithoutCalls();
    std::vector<int64_t> complete;
    for (const store::RunInfo& r : s.runs) {
      int64_t n = 0;
      for (const store::SessionReader::IterationEntry& e : reader.iterationIndex(r.name)) n += e.complete;
      complete.push_back(n);
    }
    if (o.json) {
      JsonWriter j(std::cout);
      j.beginObject().field("session", o.path).field("intact", true).field("datasets", v.datasets);
      j.field("bytes", v.bytes).field("without_checksum", v.withoutChecksum).field("incomplete_groups", v.incompleteGroups);
      j.field("read_whole", v.readWhole);
      // named, so that what no checksum vouches for can be looked at (the first 100 of each)
      j.key("without_checksum_paths").beginArray();
      for (const std::string& p : v.withoutChecksumPaths) j.value(p);
      j.endArray().key("read_whole_paths").beginArray();
      for (const std::string& p : v.readWholePaths) j.value(p);
      j.endArray();
      j.key("complete_iterations").beginObject();
      for (std::size_t i = 0; i < s.runs.size(); ++i) j.field(s.runs[i].name, complete[i]);
      j.endObject().endObject();
      std::cout << '\n';
      return 0;
    }
    std::printf("verified   %llu datasets (%.1f MiB): %llu checksums match", (unsigned long long)v.datasets,
                double(v.bytes) / (1 << 20), (unsigned long long)(v.datasets - v.withoutChecksum));
    if (v.withoutChecksum)
      std::printf("; %llu have none (an older peat's, or removed) and read back", (unsigned long long)v.withoutChecksum);
    if (v.readWhole)
      std::printf("; %llu tables and text lists (no checksum) decoded whole", (unsigned long long)v.readWhole);
    if (v.incompleteGroups)
      std::printf("; %llu iteration(s) or checkpoint(s) in flight not checked", (unsigned long long)v.incompleteGroups);
    std::printf("\n");
    // what no checksum vouches for, named (an edit there is found only if it breaks the encoding)
    const auto name = [](const char* what, const std::vector<std::string>& paths, uint64_t count) {
      if (paths.empty()) return;
      std::printf("  %s:", what);
      for (std::size_t i = 0; i < paths.size() && i < 5; ++i) std::printf(" %s", paths[i].c_str());  // printable already
      if (count > 5) std::printf(" and %llu more (--json lists %zu)", (unsigned long long)(count - 5), paths.size());
      std::printf("\n");
    };
    name("without a checksum", v.withoutChecksumPaths, v.withoutChecksum);
    name("tables and text lists (no checksum)", v.readWholePaths, v.readWhole);
    for (std::size_t i = 0; i < s.runs.size(); ++i)
      std::printf("  %s: %s, %lld complete iterations\n", safe(s.runs[i].name).c_str(), safe(s.runs[i].status).c_str(),
                  (long long)complete[i]);
    return 0;
  }
  // the calls' tensor lists only where they are printed: without them a session of 70,000 calls
  // is summarised without opening each call's datasets
  const store::SessionSummary s = o.calls ? reader.summary() : reader.summaryWithoutTensors();
  if (o.json)
    printJson(s, o.calls);
  else
    printText(s, o.calls);
  return 0;
}

}  // namespace peat::cli
