// SPDX-License-Identifier: MIT
// Test helper: rewrites an ONNX model so that its float initializers live in an external data file,
// as onnx.save(model, path, save_as_external_data=True) writes models over 2 GB.
//   onnx-external IN.onnx OUT.onnx DATA   (DATA: a file name in OUT's folder)
#include <onnx/checker.h>  // first, as in core/save/onnx_import.cpp: it selects the onnx-ml protobuf
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: onnx-external IN.onnx OUT.onnx DATA\n");
    return 2;
  }
  onnx::ModelProto m;
  std::ifstream in(argv[1], std::ios::binary);
  if (!in || !m.ParseFromIstream(&in)) {
    std::fprintf(stderr, "onnx-external: cannot read %s\n", argv[1]);
    return 1;
  }
  const std::string out = argv[2], data = argv[3];
  const std::size_t slash = out.rfind('/');
  std::ofstream bin((slash == std::string::npos ? std::string() : out.substr(0, slash + 1)) + data, std::ios::binary);
  int64_t offset = 0;
  int moved = 0;
  for (onnx::TensorProto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.data_type() != onnx::TensorProto::FLOAT) continue;
    std::string bytes = t.raw_data();
    if (!t.has_raw_data()) {
      bytes.resize(std::size_t(t.float_data_size()) * 4);
      if (!bytes.empty()) std::memcpy(bytes.data(), t.float_data().data(), bytes.size());
      t.clear_float_data();
    }
    bin.write(bytes.data(), std::streamsize(bytes.size()));
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    for (const auto& [key, value] : {std::pair<std::string, std::string>{"location", data},
                                     {"offset", std::to_string(offset)},
                                     {"length", std::to_string(bytes.size())}}) {
      auto* kv = t.add_external_data();
      kv->set_key(key);
      kv->set_value(value);
    }
    offset += int64_t(bytes.size());
    ++moved;
  }
  std::ofstream o(out, std::ios::binary);
  if (!m.SerializeToOstream(&o)) return 1;
  std::printf("%d initializers, %lld bytes in %s\n", moved, (long long)offset, data.c_str());
  return 0;
}
