// SPDX-License-Identifier: MIT
// `--mpi` for check-bits and SAVE campaigns: the campaign's shards spread over the ranks of an MPI
// job, each shard its own session file, rank 0 merging them. Shard i goes to rank i mod size, so a
// rank that dies loses only the shard it was computing: the files of finished shards stay, and the
// same command run again computes only the shards that have none (docs/scale-out.md).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "app/mpi/peat_mpi.h"
#include "app/peat/commands.h"
#include "base/sys.h"
#include "core/save/check_bits_record.h"
#include "core/save/command_settings.h"
#include "core/store/journal.h"
#include "core/store/session.h"
#include "core/torch_module.h"
#include "core/util/text.h"

namespace peat::cli {

// MPI lives in its own module (app/mpi/peat_mpi.h), built when MPI was found.
bool builtWithMpi() { return sys::fileExists(sys::modulePath("peat_mpi")); }

namespace {

struct ShardedJob {
  std::string session;  // where the merged result goes
  std::string dir;      // the shard files' folder
  int shards = 0;       // 0: one per rank
  std::function<bool(const std::string& file, int index, int count)> isDone;  // a finished shard of this campaign
  std::function<void(const std::string& file, int index, int count, unsigned threads)> run;
  std::function<int(const std::vector<std::string>& files)> merge;
};

std::string shardFile(const std::string& dir, int index, int count) {
  return dir + "/" + std::to_string(index) + "-of-" + std::to_string(count) + ".h5";
}

// A test hook: PEAT_TEST_RANK_DIES="RANK:SHARD" kills that rank with SIGKILL as it starts that shard.
void maybeDie(int rank, int shard) {
  const char* spec = std::getenv("PEAT_TEST_RANK_DIES");
  if (!spec) return;
  const char* colon = std::strchr(spec, ':');
  if (colon && std::atoi(spec) == rank && std::atoi(colon + 1) == shard) ::kill(::getpid(), SIGKILL);
}

// MPI through libpeat_mpi.so, loaded here and only here: the other commands never map MPI.
class Mpi {
 public:
  Mpi() {
    if (!builtWithMpi())
      throw std::runtime_error("this peat was built without MPI: install libopenmpi-dev and rebuild, or run the shards "
                               "with --shard INDEX/COUNT and merge them with 'peat merge'");
    static const sys::SharedLibrary module(sys::modulePath("peat_mpi"), sys::SharedLibrary::Symbols::Global);
    lib_ = &module;
    if (fn<peat_mpi_abi_version_fn>("peat_mpi_abi_version")() != PEAT_MPI_ABI_VERSION)
      throw std::runtime_error("'" + module.path() + "' is of another peat version");
    peat_mpi_world world{};
    check(fn<peat_mpi_init_fn>("peat_mpi_init")(&world), "MPI_Init");
    rank = world.rank;
    size = world.size;
    onNode = world.on_node;
  }
  ~Mpi() { fn<peat_mpi_finalize_fn>("peat_mpi_finalize")(); }
  Mpi(const Mpi&) = delete;
  Mpi& operator=(const Mpi&) = delete;

  void barrier() const { check(fn<peat_mpi_barrier_fn>("peat_mpi_barrier")(), "MPI_Barrier"); }
  void gatherChars(const char* sent, int count, char* received) const {
    check(fn<peat_mpi_gather_chars_fn>("peat_mpi_gather_chars")(sent, count, received), "MPI_Gather");
  }
  void sumToRoot(const long long* sent, long long* sums, int count) const {
    check(fn<peat_mpi_sum_to_root_fn>("peat_mpi_sum_to_root")(sent, sums, count), "MPI_Reduce");
  }
  int rank = 0, size = 1, onNode = 1;

 private:
  template <class F>
  F fn(const char* name) const {
    return reinterpret_cast<F>(lib_->symbol(name));
  }
  static void check(int code, const char* call) {
    if (code != 0) throw std::runtime_error(std::string(call) + " failed with MPI error " + std::to_string(code));
  }
  const sys::SharedLibrary* lib_ = nullptr;
};

int runSharded(const ShardedJob& job) {
  if (job.session.empty()) throw std::invalid_argument("--mpi needs --session: the merged result goes there");
  if (job.shards < 0) throw std::invalid_argument("--shards must be >= 0");
  Mpi mpi;
  const int count = job.shards ? job.shards : mpi.size;
  const std::string dir = job.dir;
  const std::string::size_type slash = dir.rfind('/');
  if (slash != std::string::npos && slash > 0) ::mkdir(dir.substr(0, slash).c_str(), 0777);  // SESSION.shards
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot create '" + dir + "': " + std::strerror(errno));
  mpi.barrier();
  // The cores of this node shared among its ranks.
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency() / unsigned(std::max(1, mpi.onNode)));

  constexpr int kMessage = 480;
  char failure[kMessage] = {0};
  long long counts[2] = {0, 0};  // computed, kept from an earlier run
  for (int i = mpi.rank; i < count && !failure[0]; i += mpi.size) {
    const std::string file = shardFile(dir, i, count);
    try {
      if (std::ifstream(file).good()) {
        bool done = false;
        try {
          done = job.isDone(file, i, count);
        } catch (const std::exception&) {  // damaged or no session: computed again
        }
        if (done) {
          ++counts[1];
          continue;
        }
        ::unlink(file.c_str());  // unfinished or of another campaign: computed again
        ::unlink(h5::journalPath(file).c_str());
      }
      maybeDie(mpi.rank, i);
      job.run(file, i, count, threads);
      ++counts[0];
    } catch (const std::exception& e) {
      std::snprintf(failure, sizeof failure, "shard %d/%d (rank %d) failed: %s", i, count, mpi.rank, e.what());
    }
  }
  // Every rank's outcome to rank 0, which alone speaks.
  std::vector<char> failures(mpi.rank == 0 ? std::size_t(kMessage) * std::size_t(mpi.size) : 1);
  mpi.gatherChars(failure, kMessage, failures.data());
  long long totals[2] = {0, 0};
  mpi.sumToRoot(counts, totals, 2);
  if (mpi.rank != 0) return failure[0] ? 1 : 0;
  for (int r = 0; r < mpi.size; ++r) {
    const char* f = failures.data() + std::size_t(r) * kMessage;
    if (f[0])
      throw std::runtime_error(std::string(f, strnlen(f, kMessage)) + "; the finished shards are kept in " + dir +
                               ": run the same command again to compute only the rest");
  }
  std::fprintf(stderr, "%d shards over %d ranks: %lld computed, %lld kept from an earlier run; merging into %s\n", count,
               mpi.size, totals[0], totals[1], job.session.c_str());
  std::vector<std::string> files;
  for (int i = 0; i < count; ++i) files.push_back(shardFile(dir, i, count));
  return job.merge(files);
}


// A SAVE job (check-bits, campaign): shard files under SESSION.shards/, merged into SESSION by the
// same code as `peat merge`.
ShardedJob saveJob(const SaveAnalyzeOptions& a, const MpiOptions& mpi) {
  ShardedJob job;
  job.session = a.session;
  job.dir = a.session + ".shards";
  job.shards = mpi.shards;
  job.merge = [session = a.session, commandLine = a.commandLine, json = a.json](const std::vector<std::string>& files) {
    SaveMergeOptions m;
    m.shards = files;
    m.session = session;
    m.commandLine = commandLine;
    m.json = json;
    return runSaveMerge(m);
  };
  return job;
}

}  // namespace

namespace {
// The options of one shard of an MPI job: its own part and file, quiet (rank 0 speaks for the job).
template <class Options>
Options shardOptions(const Options& o, const std::string& file, int index, int count) {
  Options shard = o;
  shard.mpi.enabled = false;
  shard.shard = std::to_string(index) + "/" + std::to_string(count);
  shard.analysis.session = file;
  shard.analysis.json = false;
  shard.quiet = true;
  return shard;
}
}  // namespace

int runSaveCheckBitsMpi(const SaveCheckBitsOptions& o) {
  const save::CheckBitsCampaign campaign = save::checkBitsCampaign(o);
  ShardedJob job = saveJob(o.analysis, o.mpi);
  job.isDone = [&](const std::string& file, int index, int count) {
    const auto shards = save::checkBitsShardsIn(file);
    return shards.size() == 1 && shards[0].second.campaign.id() == campaign.id() &&
           shards[0].second.campaign.shardIndex == index && shards[0].second.campaign.shardCount == count;
  };
  job.run = [&](const std::string& file, int index, int count, unsigned threads) {
    SaveCheckBitsOptions shard = shardOptions(o, file, index, count);
    if (!shard.threads) shard.threads = threads;
    runSaveCheckBits(shard);
  };
  return runSharded(job);
}

int runSaveCampaignMpi(const SaveCampaignOptions& o) {
  const std::string settings = save::campaignSettings(o);
  ShardedJob job = saveJob(o.analysis, o.mpi);
  job.isDone = [&](const std::string& file, int index, int count) {
    const store::SessionSummary s = store::SessionReader(file).summaryWithoutTensors();
    for (const store::RunInfo& r : s.runs) {
      if (r.spec.kind != "save_campaign" || r.status != "complete") continue;
      const auto shard = r.attributes.find("shard"), set = r.attributes.find("campaign");
      if (shard != r.attributes.end() && shard->second == std::to_string(index) + "/" + std::to_string(count) &&
          set != r.attributes.end() && set->second == settings)
        return true;
    }
    return false;
  };
  job.run = [&](const std::string& file, int index, int count, unsigned) {
    runSaveCampaign(shardOptions(o, file, index, count));
  };
  return runSharded(job);
}

// peat playback|runtime-fi ... --mpi [--shards N]: each shard runs the same parsed command with its
// own --shard i/N and --out FILE in this process; rank 0 merges the shards into the recorded session
// (playback) or into the --out session (runtime-fi).
int runTorchCampaignMpi(const TorchCommand& c) {
  const bool playback = c.name == "playback";
  if (c.shard != "0/1") throw std::invalid_argument("--mpi chooses the shards and their files: drop --shard");
  if (playback && !c.out.empty()) throw std::invalid_argument("--mpi chooses the shards and their files: drop --out");
  const std::string target = playback ? c.session : c.out;
  if (target.empty() || c.kernel.empty())
    throw std::invalid_argument(playback ? "playback --mpi needs --session and --kernel" : "runtime-fi --mpi needs --out and --kernel");
  std::string tag;  // the shard folder of this campaign: one per command and kernel
  for (char ch : c.kernel) tag += std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '.' ? ch : '_';
  // A shard's command line, as its session records it: the job's, without --mpi, --shards and
  // (runtime-fi) --out, and with the shard's own part and file. A rerun keeps a shard file whose
  // finished run has exactly this line.
  std::string base = "peat " + c.name;
  {
    const std::vector<std::string> words = util::splitText(c.commandLine.substr(std::min(c.commandLine.size(), base.size())), ' ');
    for (std::size_t i = 0; i < words.size(); ++i) {
      const std::string& w = words[i];
      const bool takesValue = w == "--shards" || (!playback && (w == "--out" || w == "-o"));
      if (w == "--mpi" || w.rfind("--shards=", 0) == 0 || (!playback && w.rfind("--out=", 0) == 0)) continue;
      if (takesValue) {
        ++i;
        continue;
      }
      base += " " + w;
    }
  }
  const auto shardCommand = [&](const std::string& file, int index, int count) {
    TorchCommand shard = c;
    shard.mpi = false;
    shard.shards = 0;
    shard.shard = std::to_string(index) + "/" + std::to_string(count);
    shard.out = file;
    shard.commandLine = base + " --shard " + shard.shard + " --out " + file;
    return shard;
  };
  ShardedJob job;
  job.session = target;
  job.dir = target + ".shards/" + c.name + "-" + tag;
  job.shards = c.shards;
  job.isDone = [&](const std::string& file, int index, int count) {
    const std::string expected = shardCommand(file, index, count).commandLine;
    const store::SessionSummary s = store::SessionReader(file).summaryWithoutTensors();
    bool any = false;
    for (const store::RunInfo& r : s.runs) {
      const bool ours = r.attributes.count("shard") && (playback ? r.spec.kind == "playback" : r.spec.kind.rfind("runtime_fi", 0) == 0);
      if (!ours) continue;
      const auto line = r.attributes.find("command_line");
      if (r.status != "complete" || (line != r.attributes.end() ? line->second : s.provenance.commandLine) != expected)
        return false;
      any = true;
    }
    return any;
  };
  job.run = [&](const std::string& file, int index, int count, unsigned) {
    const int rc = runTorchCommand(encode(shardCommand(file, index, count)));
    if (rc != 0) throw std::runtime_error("the " + c.name + " exited with status " + std::to_string(rc));
  };
  job.merge = [&](const std::vector<std::string>& files) {
    SaveMergeOptions m;
    m.shards = files;
    m.session = target;
    return runSaveMerge(m);
  };
  return runSharded(job);
}

}  // namespace peat::cli
