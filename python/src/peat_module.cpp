// SPDX-License-Identifier: MIT
// peat._core: the torch-free core (session store, analyzer, detector) for the Python package. It
// never loads LibTorch, so it runs in the user's own process beside whatever PyTorch is there.
// Tensors cross as NumPy arrays (bfloat16 as its uint16 bit patterns, as the store keeps it).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "core/analysis/session_analysis.h"
#include "core/analyzer/error_summary.h"
#include "core/store/run_records.h"
#include "core/store/session.h"
#include "core/version.h"

namespace py = pybind11;
using namespace peat;

namespace {

store::DType dtypeOf(const std::string& name) { return h5::typeFromName(name); }

// One tensor to write: a name, a C-contiguous buffer (NumPy 1 or 2: read through the buffer
// protocol, never NumPy's C structs) and the dtype to store ("bfloat16" for uint16 bit patterns), or a
// link to a dataset written earlier.
struct PendingTensor {
  std::string name, linkTo, dtype;
  py::buffer buffer;
  py::buffer_info info;
};

std::vector<store::NamedTensor> namedTensors(const std::vector<PendingTensor>& in) {
  std::vector<store::NamedTensor> out;
  for (const PendingTensor& t : in) {
    store::NamedTensor n;
    n.name = t.name;
    if (!t.linkTo.empty()) {
      n.linkTo = t.linkTo;
      out.push_back(n);
      continue;
    }
    n.view.dtype = dtypeOf(t.dtype);
    if (h5::typeSize(n.view.dtype) != std::size_t(t.info.itemsize))
      throw std::invalid_argument("tensor '" + t.name + "': " + t.dtype + " needs " +
                                  std::to_string(h5::typeSize(n.view.dtype)) + "-byte elements, the array has " +
                                  std::to_string(t.info.itemsize));
    py::ssize_t expect = t.info.itemsize;
    for (py::ssize_t i = t.info.ndim - 1; i >= 0; --i) {
      if (t.info.shape[std::size_t(i)] > 1 && t.info.strides[std::size_t(i)] != expect)
        throw std::invalid_argument("tensor '" + t.name + "' is not C-contiguous");
      expect *= t.info.shape[std::size_t(i)];
    }
    for (py::ssize_t d : t.info.shape) n.view.shape.push_back(uint64_t(d));
    n.view.data = t.info.ptr;
    out.push_back(n);
  }
  return out;
}

std::vector<PendingTensor> pending(const py::list& tensors) {
  std::vector<PendingTensor> out;
  for (const py::handle& h : tensors) {
    py::tuple t = py::reinterpret_borrow<py::tuple>(h);
    PendingTensor p;
    p.name = t[0].cast<std::string>();
    if (py::isinstance<py::str>(t[1])) {
      p.linkTo = t[1].cast<std::string>();
    } else {
      p.buffer = t[1].cast<py::buffer>();
      p.info = p.buffer.request();
      p.dtype = t[2].cast<std::string>();
    }
    out.push_back(std::move(p));
  }
  return out;
}

// A float32 buffer's values (the buffer protocol: NumPy 1 or 2).
std::pair<const float*, std::size_t> floats(const py::buffer_info& b, const char* what) {
  if (b.itemsize != 4 || (b.format != "f" && b.format != "<f" && b.format != "=f"))
    throw std::invalid_argument(std::string(what) + " is not a float32 array");
  std::size_t n = 1;
  for (py::ssize_t d : b.shape) n *= std::size_t(d);
  return {static_cast<const float*>(b.ptr), n};
}

store::RunStatus statusOf(const std::string& s) {
  if (s == "complete") return store::RunStatus::Complete;
  if (s == "cancelled") return store::RunStatus::Cancelled;
  if (s == "failed") return store::RunStatus::Failed;
  if (s == "running") return store::RunStatus::Running;
  throw std::invalid_argument("unknown run status '" + s + "'");
}

class Writer {
 public:
  Writer(const std::string& path, const std::map<std::string, std::string>& provenance, const std::string& mode) {
    store::Provenance p;
    auto get = [&](const char* k) { return provenance.count(k) ? provenance.at(k) : std::string(); };
    p.model = get("model");
    p.dataset = get("dataset");
    p.backend = get("backend");
    p.device = get("device");
    p.libtorchVersion = get("libtorch_version");
    p.commandLine = get("command_line");
    p.seed = provenance.count("seed") ? std::stoll(provenance.at("seed")) : 0;
    const store::WriteMode m = mode == "append"      ? store::WriteMode::Append
                               : mode == "overwrite" ? store::WriteMode::Overwrite
                                                     : store::WriteMode::Create;
    w_ = std::make_unique<store::SessionWriter>(path, p, m);
  }
  store::SessionWriter& w() {
    if (!w_) throw std::runtime_error("the session writer is closed");
    return *w_;
  }
  void close() {
    py::gil_scoped_release release;
    w_.reset();
  }
  std::unique_ptr<store::SessionWriter> w_;
};

class Reader {
 public:
  explicit Reader(const std::string& path) : r_(std::make_unique<store::SessionReader>(path)) {}
  const store::SessionReader& r() const {
    if (!r_) throw std::runtime_error("the session reader is closed");
    return *r_;
  }
  void close() { r_.reset(); }

 private:
  std::unique_ptr<store::SessionReader> r_;
};

py::dict errorSummaryDict(const analyzer::ErrorSummary& e) {
  py::dict d;
  const auto& names = analyzer::errorSummaryColumns();
  const auto values = analyzer::errorSummaryValues(e);
  for (std::size_t i = 0; i < names.size(); ++i) d[py::str(names[i])] = values[i];
  return d;
}

py::dict verdictDict(const detector::Verdict& v) {
  py::dict d;
  d["model"] = v.model;
  d["confidence"] = v.confidence;
  d["parameters"] = v.parameters;
  d["evidence"] = v.evidence;
  d["explanation"] = v.explanation;
  return d;
}

// A call's identity, verdict and alternatives (an analysed call or one its kernel failed).
template <typename Call>
py::dict callDict(const Call& c) {
  py::dict d;
  d["call"] = c.call;
  d["layer"] = c.layer;
  d["op"] = c.op;
  d["iteration"] = c.iteration;
  d["call_index"] = c.callIndex;
  d["verdict"] = verdictDict(c.detection.verdict);
  py::list alts;
  for (const detector::Verdict& v : c.detection.alternatives) alts.append(verdictDict(v));
  d["alternatives"] = alts;
  return d;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "PEAT's torch-free core: session store, analyzer and detector";
  m.attr("version") = toolVersion();
  py::register_exception<store::SessionError>(m, "SessionError", PyExc_RuntimeError);

  py::class_<Writer>(m, "Writer")
      .def(py::init<const std::string&, const std::map<std::string, std::string>&, const std::string&>(),
           py::arg("path"), py::arg("provenance"), py::arg("mode") = "create")
      .def("has_run", [](Writer& s, const std::string& n) { return s.w().hasRun(n); })
      .def("begin_run",
           [](Writer& s, const std::string& name, const std::string& kind, const std::string& kernel,
              const std::string& description) { s.w().beginRun({name, kind, kernel, description}); })
      .def("set_run_attribute", [](Writer& s, const std::string& k, const std::string& v) { s.w().setRunAttribute(k, v); })
      .def("set_call_compression", [](Writer& s, int level) { s.w().setCallCompression(level); })
      .def("begin_iteration", [](Writer& s, int64_t i) { s.w().beginIteration(i); })
      // tensors: [(name, array, dtype) | (name, "/abs/path/of/earlier/dataset")]
      .def("record_call",
           [](Writer& s, const std::string& layer, const std::string& op, const std::string& phase, int64_t iteration,
              int64_t index, const py::list& tensors, const std::map<std::string, int64_t>& params,
              const std::map<std::string, std::string>& labels) {
             const std::vector<PendingTensor> p = pending(tensors);
             const std::vector<store::NamedTensor> named = namedTensors(p);
             store::CallId id{layer, op, phase == "backward" ? store::Phase::Backward : store::Phase::Forward, iteration, index};
             py::gil_scoped_release release;
             return s.w().recordCall(id, named, params, labels);
           })
      .def("end_iteration",
           [](Writer& s) {
             py::gil_scoped_release release;
             s.w().endIteration();
           })
      .def("write_checkpoint",
           [](Writer& s, int64_t iteration, const py::list& parameters, const py::list& optimizer) {
             const std::vector<PendingTensor> p = pending(parameters), o = pending(optimizer);
             const auto np = namedTensors(p), no = namedTensors(o);
             py::gil_scoped_release release;
             s.w().writeCheckpoint(iteration, np, no);
           })
      // columns: [(name, [str...]) | (name, [float...])]
      .def("write_table",
           [](Writer& s, const std::string& name, const py::list& columns) {
             std::vector<h5::Column> cols;
             for (const py::handle& h : columns) {
               py::tuple t = py::reinterpret_borrow<py::tuple>(h);
               h5::Column c;
               c.name = t[0].cast<std::string>();
               py::list values = t[1].cast<py::list>();
               c.isText = values.size() > 0 && py::isinstance<py::str>(values[0]);
               if (t.size() > 2) c.isText = t[2].cast<bool>();
               for (const py::handle& v : values)
                 if (c.isText)
                   c.text.push_back(v.cast<std::string>());
                 else
                   c.numbers.push_back(v.cast<double>());
               cols.push_back(std::move(c));
             }
             s.w().writeTable(name, cols);
           })
      .def("end_run", [](Writer& s, const std::string& status) { s.w().endRun(statusOf(status)); })
      .def("flush", [](Writer& s) { s.w().flush(); })
      .def("close", &Writer::close);

  // Reading: the summary as plain dicts and tensors as arrays.
  m.def("summary", [](const std::string& path) {
    store::SessionReader r(path);
    const store::SessionSummary s = r.summary();
    py::dict out;
    out["path"] = s.path;
    out["created"] = s.created;
    py::list runs;
    for (const store::RunInfo& run : s.runs) {
      py::dict rd;
      rd["name"] = run.name;
      rd["kind"] = run.spec.kind;
      rd["kernel"] = run.spec.kernel;
      rd["status"] = run.status;
      rd["attributes"] = run.attributes;
      rd["tables"] = run.tables;
      rd["checkpoints"] = run.checkpoints;
      py::list its;
      for (const store::IterationInfo& it : run.iterations) {
        py::dict itd;
        itd["iteration"] = it.iteration;
        itd["complete"] = it.complete;
        py::list calls;
        for (const store::CallInfo& c : it.calls) {
          py::dict cd;
          cd["path"] = c.path;
          cd["layer"] = c.id.layer;
          cd["op"] = c.id.op;
          cd["phase"] = store::phaseName(c.id.phase);
          cd["iteration"] = c.id.iteration;
          cd["call_index"] = c.id.callIndex;
          cd["params"] = c.params;
          cd["labels"] = c.labels;
          py::list ts;
          for (const store::TensorInfo& t : c.tensors) ts.append(py::make_tuple(t.name, t.dtype, t.shape));
          cd["tensors"] = ts;
          calls.append(cd);
        }
        itd["calls"] = calls;
        its.append(itd);
      }
      rd["iterations"] = its;
      runs.append(rd);
    }
    out["runs"] = runs;
    return out;
  });

  py::class_<Reader>(m, "Reader")
      .def(py::init<const std::string&>())
      // (dtype name, shape, bytes); the caller makes the array (bfloat16 stays uint16 bit patterns)
      .def("read_tensor",
           [](Reader& r, const std::string& run, const std::string& call, const std::string& name) {
             store::Tensor t;
             {
               py::gil_scoped_release release;
               t = r.r().readTensor(run, call, name);
             }
             return py::make_tuple(std::string(h5::typeName(t.dtype)), t.shape,
                                   py::bytes(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size()));
           })
      .def("table",
           [](Reader& r, const std::string& run, const std::string& name) {
             py::dict d;
             for (const h5::Column& c : r.r().table(run, name))
               if (c.isText)
                 d[py::str(c.name)] = c.text;
               else
                 d[py::str(c.name)] = c.numbers;
             return d;
           })
      .def("verify",
           [](Reader& r) {
             store::SessionReader::Verification v;
             {
               py::gil_scoped_release release;
               v = r.r().verify();
             }
             py::dict d;
             d["datasets"] = v.datasets;
             d["bytes"] = v.bytes;
             d["incomplete_groups"] = v.incompleteGroups;
             d["read_whole"] = v.readWhole;
             return d;
           })
      // HDF5 refuses a writer while this process holds the file open: close before writing.
      .def("close", &Reader::close);

  // Per-call error numbers of a candidate against golden, both float32 arrays of one size.
  m.def("summarize", [](py::buffer golden, py::buffer candidate) {
    const py::buffer_info gi = golden.request(), ci = candidate.request();
    const auto [g, gn] = floats(gi, "golden");
    const auto [c, cn] = floats(ci, "candidate");
    if (gn != cn) throw std::invalid_argument("golden and candidate differ in size");
    analyzer::ErrorSummary e;
    {
      py::gil_scoped_release release;
      e = analyzer::summarize(g, c, uint64_t(gn));
    }
    return errorSummaryDict(e);
  });
  m.def("error_summary_columns", []() { return analyzer::errorSummaryColumns(); });

  // The analyzer and detector over a playback run with stored outputs: writes the analysis run and
  // returns each call's verdict.
  m.def(
      "analyze_session",
      [](const std::string& session, const std::string& run, const std::string& call) {
        analyzer::SessionAnalysis a;
        {
          py::gil_scoped_release release;
          a = analyzer::analyzeSession(session, run, call, analyzer::ReportOptions{});
        }
        py::dict out;
        out["run"] = a.resultRun;
        out["source_run"] = a.sourceRun;
        py::list calls;
        for (const analyzer::CallAnalysis& c : a.calls) {
          py::dict d = callDict(c);
          d["mismatched"] = c.report.mismatched;
          d["elements"] = c.report.elements;
          d["max_abs"] = c.report.maxAbs;
          calls.append(d);
        }
        for (const analyzer::KernelFailure& f : a.failures) calls.append(callDict(f));
        out["calls"] = calls;
        return out;
      },
      py::arg("session"), py::arg("run"), py::arg("call") = "");
}
