// The part of a communicator that lives on a GPU. core/device implements it (CUDA builds);
// core only needs to abort it from any thread (weft_comm_abort) and to destroy it with the
// communicator.
#pragma once

namespace weft {

class DeviceState {
 public:
  virtual ~DeviceState() = default;
  // Any thread, any time: stops device work in flight (ncclCommAbort) so waits end.
  virtual void abort() noexcept = 0;
};

}  // namespace weft
