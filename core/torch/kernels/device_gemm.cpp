// SPDX-License-Identifier: MIT
// GEMM candidates that run on a compute device (gpu/): the CUDA or HIP kernels on a GPU, the CPU
// reference kernels on "cpu", with the same results where the sums are specified. Every GEMM-based
// call goes through runThroughGemm; operands are uploaded, the product downloaded.
#include <ATen/ATen.h>

#include "core/torch/kernels/candidates.h"
#include "gpu/backend.h"

namespace peat::kernels {

namespace {

class DeviceGemmKernel final : public Kernel {
 public:
  DeviceGemmKernel(std::string name, gpu::GemmKind kind, int parts, const std::string& device)
      : name_(std::move(name)), kind_(kind), parts_(parts) {
    try {
      opened_ = gpu::openDevice(device);
    } catch (const std::exception& e) {
      throw KernelError("kernel " + name_ + ": " + e.what());
    }
    stream_ = opened_.device->createStream();
  }
  std::string name() const override { return name_; }
  bool supports(ops::OpKind kind) const override { return ops::isGemmOp(kind); }
  at::Tensor run(const ops::OpCall& call, const CallContext&) override {
    return runThroughGemm(call, [this](const at::Tensor& a, const at::Tensor& b) {
      gpu::Device& d = *opened_.device;
      const gpu::GemmShape shape{uint64_t(a.size(0)), uint64_t(b.size(1)), uint64_t(a.size(1)),
                                 int(std::min<int64_t>(parts_, a.size(1)))};
      at::Tensor c = at::empty({a.size(0), b.size(1)});
      if (a.numel() == 0 || b.numel() == 0) return c.zero_();
      fit(a_, uint64_t(a.numel()) * 4);
      fit(b_, uint64_t(b.numel()) * 4);
      fit(c_, uint64_t(c.numel()) * 4);
      d.upload(*a_, 0, a.data_ptr<float>(), uint64_t(a.numel()) * 4, *stream_);
      d.upload(*b_, 0, b.data_ptr<float>(), uint64_t(b.numel()) * 4, *stream_);
      d.gemm(kind_, shape, *a_, *b_, *c_, *stream_);
      d.download(c.data_ptr<float>(), *c_, 0, uint64_t(c.numel()) * 4, *stream_);
      d.synchronize(*stream_);
      return c;
    });
  }

 private:
  // Buffers grow to the largest call seen and are reused.
  void fit(std::unique_ptr<gpu::Buffer>& buffer, uint64_t bytes) {
    if (!buffer || buffer->bytes() < bytes) {
      buffer.reset();
      buffer = opened_.device->allocate(bytes);
    }
  }

  std::string name_;
  gpu::GemmKind kind_;
  int parts_;
  gpu::OpenedDevice opened_;
  std::unique_ptr<gpu::Stream> stream_;
  std::unique_ptr<gpu::Buffer> a_, b_, c_;
};

}  // namespace

std::unique_ptr<Kernel> makeDeviceGemmKernel(const std::string& name, gpu::GemmKind kind, int parts,
                                             const std::string& device) {
  return std::make_unique<DeviceGemmKernel>(name, kind, parts, device);
}

}  // namespace peat::kernels
