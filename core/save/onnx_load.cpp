// SPDX-License-Identifier: MIT
// The ONNX importer's first steps: the file (its opset, external data, ONNX's checker and shape
// inference), its initializers as constants (replaced from a checkpoint where asked), its one
// input, and at the end the output's shape against the one the model declares.
#include "core/save/onnx_import_detail.h"  // first: it includes onnx/checker.h first

#include <onnx/shape_inference/implementation.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <unordered_map>

namespace peat::save::onnx_import {

std::string typeName(int t) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return "float32";
    case onnx::TensorProto::DOUBLE: return "float64";
    case onnx::TensorProto::FLOAT16: return "float16";
    case onnx::TensorProto::BFLOAT16: return "bfloat16";
    case onnx::TensorProto::INT64: return "int64";
    case onnx::TensorProto::INT32: return "int32";
    case onnx::TensorProto::INT8: return "int8";
    case onnx::TensorProto::UINT8: return "uint8";
    default: return "type " + std::to_string(t);
  }
}

namespace {

// A tensor's `count` elements, from its raw bytes (little-endian) or its typed field.
template <typename T, typename Field>
std::vector<T> elements(const onnx::TensorProto& t, const Field& field, int64_t count, const char* what) {
  std::vector<T> out;
  if (t.has_raw_data()) {
    if (t.raw_data().size() != std::size_t(count) * sizeof(T))
      throw SaveError("ONNX " + std::string(what) + " '" + t.name() + "' holds the wrong number of bytes");
    out.resize(std::size_t(count));
    if (count > 0) std::memcpy(out.data(), t.raw_data().data(), t.raw_data().size());
  } else {
    if (field.size() != count)
      throw SaveError("ONNX " + std::string(what) + " '" + t.name() + "' holds the wrong number of values");
    out.assign(field.begin(), field.end());
  }
  return out;
}

}  // namespace

void Importer::load() {
  std::ifstream in(path_, std::ios::binary);
  if (!in) throw SaveError("cannot read ONNX model '" + path_ + "'");
  if (!model_.ParseFromIstream(&in)) throw SaveError("'" + path_ + "' is not an ONNX model (the protobuf does not parse)");
  for (const auto& op : model_.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
  for (const auto& op : model_.opset_import())
    if ((op.domain().empty() || op.domain() == "ai.onnx") && op.version() > kNewestLowered)
      throw SaveError("ONNX model '" + path_ + "' uses opset " + std::to_string(op.version()) +
                      ", newer than SAVE reads (" + std::to_string(kNewestLowered) +
                      "): export it with torch.onnx.export(..., opset_version=17)");
  if (opset_ > kNewestOpset) lowerToOpset17(model_, path_);  // what exporters write now, in 17's words
  if (model_.ir_version() > 8)  // libonnx 1.12 reads IR 8; a newer IR only adds what a float model lacks
    throw SaveError("ONNX model '" + path_ + "' has IR version " + std::to_string(model_.ir_version()) +
                    " with opset " + std::to_string(opset_) + ", newer than SAVE reads (8): export it with "
                    "torch.onnx.export(..., opset_version=17)");
  for (onnx::TensorProto& t : *model_.mutable_graph()->mutable_initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL) readExternal(t);
  try {
    onnx::checker::check_model(model_);
    onnx::shape_inference::InferShapes(model_);
  } catch (const std::exception& e) {
    std::string what = e.what();
    throw SaveError("ONNX model '" + path_ + "' does not pass ONNX's checker: " + what.substr(0, what.find('\n')));
  }
  identityGathers();
}

// PyTorch 2.x's exporter writes as_strided (a view of a tensor's storage) as a Gather, along axis 0,
// from the tensor flattened, by constant indices. Where those indices are every element once and in
// order (0, 1, ..., L-1 laid out in a shape S, L the flattened length: the identity view ConvNeXt's
// head takes), the Gather is exactly a Reshape to S, and is rewritten as one: the batch check and
// the importer follow a Reshape, not a table of indices.
void Importer::identityGathers() {
  onnx::GraphProto* g = model_.mutable_graph();
  // each name looked up once (a scan per Gather was quadratic in a graph with many of them)
  std::unordered_map<std::string, const onnx::TensorProto*> initializers;
  for (const auto& t : g->initializer()) initializers.emplace(t.name(), &t);
  std::unordered_map<std::string, int64_t> lengths;  // 1-D values' known lengths
  const auto addLength = [&](const onnx::ValueInfoProto& vi) {
    const onnx::TypeProto& t = vi.type();
    if (!t.has_tensor_type() || !t.tensor_type().has_shape() || t.tensor_type().shape().dim_size() != 1) return;
    const auto& d = t.tensor_type().shape().dim(0);
    if (d.has_dim_value()) lengths.emplace(vi.name(), d.dim_value());
  };
  for (const auto& vi : g->value_info()) addLength(vi);
  for (const auto& vi : g->input()) addLength(vi);
  const auto lengthOf = [&](const std::string& v) -> int64_t {
    const auto it = lengths.find(v);
    return it == lengths.end() ? -1 : it->second;
  };
  for (int i = 0; i < g->node_size(); ++i) {
    onnx::NodeProto& n = *g->mutable_node(i);
    if (n.op_type() != "Gather" || n.input_size() != 2 || n.output_size() != 1) continue;
    bool axisZero = true;
    for (const auto& a : n.attribute()) axisZero = axisZero && !(a.name() == "axis" && a.i() != 0);
    const auto found = initializers.find(n.input(1));
    const onnx::TensorProto* indices = found == initializers.end() ? nullptr : found->second;
    if (!axisZero || !indices || indices->data_type() != onnx::TensorProto::INT64 || indices->dims_size() == 0) continue;
    int64_t count = 1;
    for (int64_t d : indices->dims()) count = d > 0 && count <= (int64_t(1) << 31) / d ? count * d : -1;
    if (count <= 0 || count != lengthOf(n.input(0))) continue;
    const std::vector<int64_t> v = elements<int64_t>(*indices, indices->int64_data(), count, "initializer");
    bool identity = true;
    for (int64_t k = 0; k < count && identity; ++k) identity = v[std::size_t(k)] == k;
    if (!identity) continue;
    onnx::TensorProto shape;
    shape.set_name("peat_identity_gather_" + std::to_string(i));
    shape.set_data_type(onnx::TensorProto::INT64);
    shape.add_dims(indices->dims_size());
    for (int64_t d : indices->dims()) shape.add_int64_data(d);
    *g->add_initializer() = shape;
    n.set_op_type("Reshape");
    n.set_input(1, shape.name());
    n.clear_attribute();
  }
}

// An initializer kept in an external data file (models over 2 GB; onnx.save(...,
// save_as_external_data=True)): its bytes, read from the file named relative to the model's
// folder (no absolute paths, no "..": a model from someone else reads nothing outside it).
void Importer::readExternal(onnx::TensorProto& t) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoll(kv.value());
      else if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      throw SaveError("ONNX model '" + path_ + "': initializer '" + t.name() + "' has a bad external-data " + kv.key());
    }
  }
  const std::string what = "ONNX model '" + path_ + "': initializer '" + t.name() + "' ";
  if (location.empty() || location[0] == '/' || location.find("..") != std::string::npos)
    throw SaveError(what + "names an external data file outside the model's folder ('" + location + "')");
  const std::size_t slash = path_.rfind('/');
  const std::string folder = slash == std::string::npos ? std::string(".") : path_.substr(0, slash + 1);
  const std::string file = (slash == std::string::npos ? std::string() : folder) + location;
  // Resolved, links included: the bytes must come from a regular file inside the model's folder
  // (a link to /etc/passwd, a FIFO, a device or a directory is refused before it is opened).
  char resolvedFolder[PATH_MAX], resolvedFile[PATH_MAX];
  if (!::realpath(folder.c_str(), resolvedFolder) || !::realpath(file.c_str(), resolvedFile))
    throw SaveError(what + "is kept in external data file '" + file + "', which is missing");
  const std::string inside = std::string(resolvedFolder) + "/";
  if (std::strncmp(resolvedFile, inside.c_str(), inside.size()) != 0)
    throw SaveError(what + "names external data file '" + file + "', which resolves to '" + resolvedFile +
                    "', outside the model's folder");
  const int fd = ::open(resolvedFile, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0) ::close(fd);
    throw SaveError(what + "names external data '" + file + "', which is not a regular file");
  }
  const int64_t size = int64_t(st.st_size);
  if (length < 0) length = size - offset;
  if (offset < 0 || length < 0 || offset > size || length > size - offset) {
    ::close(fd);
    throw SaveError(what + "lies outside its external data file '" + file + "' (" + std::to_string(size) + " bytes)");
  }
  std::string bytes(std::size_t(length), '\0');
  int64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, bytes.data() + done, std::size_t(length - done), off_t(offset + done));
    if (n <= 0) break;
    done += n;
  }
  ::close(fd);
  if (done != length) throw SaveError(what + "could not be read from '" + file + "'");
  t.set_raw_data(std::move(bytes));
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
}


Constant Importer::decode(const onnx::TensorProto& t, const char* what) {
  Constant c;
  c.dims.assign(t.dims().begin(), t.dims().end());
  int64_t count = 1;
  for (int64_t d : c.dims) {
    if (d < 0 || d > (int64_t(1) << 31)) throw SaveError("ONNX " + std::string(what) + " '" + t.name() + "' has a bad shape");
    if (d != 0 && count > (int64_t(1) << 31) / d)
      throw SaveError("ONNX " + std::string(what) + " '" + t.name() + "' is too large");
    count *= d;
  }
  if (t.data_type() == onnx::TensorProto::FLOAT) {
    c.isFloat = true;
    c.values = elements<float>(t, t.float_data(), count, what);
  } else if (t.data_type() == onnx::TensorProto::INT64) {
    typeOf_[t.name()] = "int64";
    c.integers = elements<int64_t>(t, t.int64_data(), count, what);
  } else if (t.data_type() == onnx::TensorProto::INT32 || t.data_type() == onnx::TensorProto::BOOL) {
    // shape arithmetic and masks; kept as integers, refused where a node wants float weights
    nonFloat_.insert(t.name());
    typeOf_[t.name()] = typeName(t.data_type());
    if (t.data_type() == onnx::TensorProto::INT32) {
      const std::vector<int32_t> v = elements<int32_t>(t, t.int32_data(), count, what);
      c.integers.assign(v.begin(), v.end());
    } else if (t.has_raw_data()) {
      const std::vector<uint8_t> v = elements<uint8_t>(t, t.int32_data(), count, what);
      c.integers.assign(v.begin(), v.end());
    } else {
      const std::vector<int32_t> v = elements<int32_t>(t, t.int32_data(), count, what);
      c.integers.assign(v.begin(), v.end());
    }
  } else {
    nonFloat_.insert(t.name());  // refused where a node uses it as a weight
    typeOf_[t.name()] = typeName(t.data_type());
  }
  return c;
}

// Initializers replaced by name from a checkpoint (a model fine-tuned with PEAT): every tensor of
// the checkpoint that names a float initializer must have its shape; at least one must match.
void Importer::replace() {
  int64_t replaced = 0;
  for (const auto& [name, t] : *replacements_) {
    auto it = constants_.find(name);
    if (it == constants_.end() || !it->second.isFloat) continue;
    std::vector<int64_t> shape(t.shape.begin(), t.shape.end());
    if (shape != it->second.dims || t.dtype != store::DType::F32)
      throw SaveError("checkpoint tensor '" + name + "' does not have the shape of ONNX initializer '" + name + "'");
    std::memcpy(it->second.values.data(), t.bytes.data(), t.bytes.size());
    ++replaced;
  }
  if (replaced == 0)
    throw SaveError("no initializer of ONNX model '" + path_ + "' has the name of a checkpoint tensor (e.g. '" +
                    (replacements_->empty() ? std::string("?") : replacements_->begin()->first) +
                    "'); export with torch.onnx.export(..., do_constant_folding=False) so that the initializers "
                    "keep the module's parameter names");
  g_.model = path_ + " (" + std::to_string(replaced) + " initializers from the checkpoint)";
}

// An integer input is read as token ids when every node that reads it looks them up in a float32
// table (Gather of a 2-D initializer along axis 0: nn.Embedding's export) or takes its Shape; the
// ids' range is then the tables' rows. Anything else reading them is refused, naming the node.
void Importer::tokenInput(const std::string& name, const std::string& type, bool several) {
  const std::string lead = "ONNX model '" + path_ + "': input '" + name + "' is " + type +
                           "; SAVE reads an integer input only as token ids looked up in an embedding table (Gather "
                           "of a float32 initializer along axis 0)";
  bool lookedUp = false;
  for (const onnx::NodeProto& n : model_.graph().node())
    for (const std::string& v : n.input()) {
      if (v != name) continue;
      const Constant* table = n.input_size() == 2 ? constant(n.input(0)) : nullptr;
      const bool lookup = n.op_type() == "Gather" && n.input(1) == name && table && table->isFloat &&
                          table->dims.size() == 2 && table->dims[0] > 0 && intAttr(n, "axis", 0) == 0;
      if (!lookup && n.op_type() != "Shape") {
        // beside other inputs, an integer input read otherwise is read as values (an attention mask):
        // moved and cast to float, never computed on as integers (mapIntegerValue)
        if (several) return void(integerInputs_.insert(name));
        throw SaveError(lead + ", and node '" + (n.name().empty() ? n.output(0) : n.name()) + "' (" + n.op_type() +
                        ") reads it otherwise");
      }
      lookedUp = lookedUp || lookup;
    }
  if (!lookedUp && several) {  // read by no node but Shape: its values reach nothing, any range holds
    integerInputs_.insert(name);
    unreadInputs_.insert(name);
    return;
  }
  if (!lookedUp) throw SaveError(lead + ", and no node looks it up");
  tokenInputs_.insert(name);
}

// One sample's shape of input `in` (its dimensions from `first` on), each fixed and positive, and
// at most 2^26 elements (bounded before anything is allocated for it: a 150-byte file may declare
// [1, 2^62, 4], whose count wraps to 0 in 64 bits).
std::vector<int64_t> Importer::sampleShape(const onnx::ValueInfoProto& in, int first) const {
  std::vector<int64_t> shape;
  const auto& dims = in.type().tensor_type().shape().dim();
  for (int i = first; i < dims.size(); ++i) {
    if (dims[i].has_dim_value() && dims[i].dim_value() == 0)
      throw SaveError("ONNX model '" + path_ + "': dimension " + std::to_string(i) + " of input '" + in.name() +
                      "' is 0 (an empty tensor); export with a non-empty input");
    if (!dims[i].has_dim_value() || dims[i].dim_value() <= 0)
      throw SaveError("ONNX model '" + path_ + "': dimension " + std::to_string(i) + " of input '" + in.name() +
                      "' is dynamic ('" + dims[i].dim_param() + "'); export with a fixed input shape");
    shape.push_back(dims[i].dim_value());
  }
  if (shape.empty()) throw SaveError("ONNX model '" + path_ + "': input '" + in.name() + "' has no sample dimensions");
  constexpr int64_t kMaxInputElements = int64_t(1) << 26;  // 256 MiB of fp32 per sample
  int64_t count = 1;
  for (int64_t d : shape)
    if (d > kMaxInputElements / count)
      throw SaveError("ONNX model '" + path_ + "': input '" + in.name() + "' declares more than 2^26 elements per "
                      "sample (dimension " + std::to_string(d) + "); SAVE's limit is 2^26 (67,108,864)");
    else
      count *= d;
  return shape;
}

void Importer::input() {
  std::set<std::string> initialisers;
  for (const auto& t : model_.graph().initializer()) initialisers.insert(t.name());
  std::vector<const onnx::ValueInfoProto*> ins;
  for (const auto& v : model_.graph().input())
    if (!initialisers.count(v.name())) ins.push_back(&v);
  if (ins.empty()) throw SaveError("ONNX model '" + path_ + "' has no input");
  std::vector<std::string> names;
  for (const auto* in : ins) {
    const auto& type = in->type().tensor_type();
    const bool integer = type.elem_type() == onnx::TensorProto::INT64 || type.elem_type() == onnx::TensorProto::INT32;
    if (integer)  // token ids, a mask read as values beside other inputs, or refused naming the node
      tokenInput(in->name(), typeName(type.elem_type()), ins.size() > 1);
    else if (type.elem_type() != onnx::TensorProto::FLOAT)
      throw SaveError("ONNX model '" + path_ + "': input '" + in->name() + "' is " + typeName(type.elem_type()) +
                      "; SAVE analyses float32 inputs and integer ones (token ids, masks)");
    if (std::find(names.begin(), names.end(), in->name()) != names.end())
      throw SaveError("ONNX model '" + path_ + "' names two inputs '" + in->name() + "'");
    names.push_back(in->name());
  }
  std::string quoted;
  for (const std::string& n : names) quoted += (quoted.empty() ? "'" : ", '") + n + "'";
  const std::string which = ins.size() == 1 ? "input " + quoted : "inputs " + quoted;
  // The first dimension is a batch where the model says so (a symbolic dimension, or 1), and where
  // a model that fixes it to N computes each sample alone (checked: mixesSamples). Else the whole
  // declared input is one sample (a Transpose, Concat or Reshape over axis 0 mixes its samples).
  // Several inputs are read alike: all with a batch axis, or all fixing it to the same N.
  int first = 1;
  const auto fixedOf = [](const onnx::ValueInfoProto* in) -> std::pair<bool, int64_t> {
    const auto& dims = in->type().tensor_type().shape().dim();
    if (dims.size() > 0 && dims[0].has_dim_value() && dims[0].dim_value() != 1) return {true, dims[0].dim_value()};
    return {false, 0};
  };
  const auto [isFixed, fixed] = fixedOf(ins.front());
  for (const auto* in : ins)
    if (fixedOf(in) != fixedOf(ins.front()))
      throw SaveError("ONNX model '" + path_ + "': input '" + in->name() + "' and input '" + ins.front()->name() +
                      "' differ in their first dimension (" +
                      (fixedOf(in).first ? std::to_string(fixedOf(in).second) : "a batch") + " and " +
                      (isFixed ? std::to_string(fixed) : "a batch") + "); SAVE reads their samples side by side");
  if (isFixed) {
    std::string why;
    if (fixed < 1) why = "it is not positive";
    for (const auto* in : ins)
      if (why.empty() && in->type().tensor_type().shape().dim_size() == 1)
        why = ins.size() == 1 ? "it is the only dimension, a sample needs one"
                              : "input '" + in->name() + "' has only that dimension, a sample needs one";
    if (why.empty()) why = mixesSamples(names);
    const std::string n = std::to_string(fixed);
    const std::string fixes = which + (ins.size() == 1 ? " fixes its" : " fix their") + " first dimension to " + n;
    if (why.empty()) {
      fixedBatch_ = fixed;
      g_.batch = fixes + ": read as a batch (no node mixes samples, checked with that dimension marked)";
    } else {
      first = 0;
      g_.batch = fixes + ", not read as a batch (" + why + "): the whole declared input is one sample";
    }
  }
  std::vector<std::vector<int64_t>> shapes;
  int64_t total = 0;
  for (const auto* in : ins) {
    shapes.push_back(sampleShape(*in, first));
    const int64_t size = makePart("", 0, shapes.back()).size();
    if (size > (int64_t(1) << 26) - total)
      throw SaveError("ONNX model '" + path_ + "': its inputs declare more than 2^26 elements per sample together; "
                      "SAVE's limit is 2^26 (67,108,864)");
    g_.inputs.push_back(makePart(in->name(), total, shapes.back()));
    g_.inputs.back().integer = integerInputs_.count(in->name()) > 0;
    if (unreadInputs_.count(in->name())) g_.inputs.back().lo = -16777216, g_.inputs.back().hi = 16777216;  // +-2^24
    total += size;
  }
  if (ins.size() == 1) {
    values_[names[0]] = b_.input(shapes[0]);
  } else {  // node 0 holds every input's sample end to end; each input is its part
    const int node = b_.input({total});
    for (const OutputPart& p : g_.inputs) {
      std::vector<int64_t> gather(std::size_t(p.size()));
      for (int64_t e = 0; e < p.size(); ++e) gather[std::size_t(e)] = p.offset + e;
      values_[p.name] = b_.select("input." + p.name, node, p.shape, gather);
    }
  }
  integerValues_ = integerInputs_;  // tracked through moves until cast to float32
  if (first == 0) {
    wholeSample_ = true;
    for (std::size_t k = 0; k < names.size(); ++k) dims_[names[k]] = shapes[k];  // no batch axis: the sample's own dims
  }
}

// The output's computed shape against the shape the model declares (its batch dimension and
// leading 1s aside: SAVE keeps one sample's shape, [1000] for a declared [1, 1000]). A model
// whose declared and computed shapes differ was misread: refused, naming both.
void Importer::checkDeclaredOutput(const onnx::ValueInfoProto& out, int node) const {
  const std::vector<int64_t>& computed = g_.nodes[std::size_t(node)].shape;
  const auto text = [](const std::vector<int64_t>& d) {
    std::string t = "[";
    for (std::size_t i = 0; i < d.size(); ++i) t += (i ? "x" : "") + std::to_string(d[i]);
    return t + "]";
  };
  if (countOf(computed) == 0)
    throw SaveError("ONNX model '" + path_ + "': its output '" + out.name() + "' is computed empty " + text(computed));
  if (!out.type().has_tensor_type() || !out.type().tensor_type().has_shape()) return;  // nothing declared
  const auto& dims = out.type().tensor_type().shape().dim();
  std::vector<int64_t> declared;
  for (int i = wholeSample_ ? 0 : 1; i < dims.size(); ++i) {
    if (!dims[i].has_dim_value()) return;  // a symbolic dimension: nothing to compare
    declared.push_back(dims[i].dim_value());
  }
  if (!wholeSample_ && dims.size() > 0 && dims[0].has_dim_value() && dims[0].dim_value() != 1 &&
      dims[0].dim_value() != fixedBatch_)
    throw SaveError("ONNX model '" + path_ + "': its output '" + out.name() + "' declares a first dimension of " +
                    std::to_string(dims[0].dim_value()) + " where SAVE computes one sample");
  const auto squeezed = [](std::vector<int64_t> d) {
    while (!d.empty() && d.front() == 1) d.erase(d.begin());
    return d;
  };
  if (squeezed(declared) != squeezed(computed))
    throw SaveError("ONNX model '" + path_ + "': its output '" + out.name() + "' is declared " +
                    (dims.size() > 0 && !wholeSample_ ? "[N]x" : "") + text(declared) + " per sample but SAVE computes " + text(computed) +
                    "; refused rather than read wrong");
}

}  // namespace peat::save::onnx_import
