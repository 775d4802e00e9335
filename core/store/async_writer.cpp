// SPDX-License-Identifier: MIT
#include "core/store/async_writer.h"

namespace peat::store {

AsyncSessionWriter::AsyncSessionWriter(std::unique_ptr<SessionWriter> writer, std::size_t maxQueuedBytes)
    : writer_(std::move(writer)), maxBytes_(maxQueuedBytes), thread_([this] { loop(); }) {}

AsyncSessionWriter::~AsyncSessionWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void AsyncSessionWriter::rethrowFailure() {
  if (failure_) std::rethrow_exception(failure_);
}

void AsyncSessionWriter::post(std::function<void(SessionWriter&)> task, std::size_t bytes) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return failure_ || queuedBytes_ == 0 || queuedBytes_ + bytes <= maxBytes_; });
  rethrowFailure();
  queue_.emplace_back(std::move(task), bytes);
  queuedBytes_ += bytes;
  changed_.notify_all();
}

void AsyncSessionWriter::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return failure_ || (queue_.empty() && !busy_); });
  rethrowFailure();
}

void AsyncSessionWriter::loop() {
  h5::silenceLibraryDiagnostics();  // HDF5's automatic error printing is set per thread
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    auto [task, bytes] = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr error;
    if (!failure_) {
      try {
        task(*writer_);
      } catch (...) {
        error = std::current_exception();
      }
    }
    lock.lock();
    busy_ = false;
    queuedBytes_ -= bytes;
    if (error && !failure_) failure_ = error;
    changed_.notify_all();
  }
}

}  // namespace peat::store
