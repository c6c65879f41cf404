// nccl_bindings.h: the Node-API face of NCCL (csrc/comm/): the library probe and
// unique id as addon functions, and a communicator opened on a device.
#pragma once
#include <napi.h>

#include <memory>

#include "../runtime/device.h"

namespace kiln::addon {

/** exports.ncclLibrary(path) -> { path, version }; exports.ncclUniqueId(path) -> Uint8Array(128). Both throw with a code. */
void register_nccl(Napi::Env env, Napi::Object exports);

/**
 * device.openNccl(path, uniqueId, rank, worldSize, timeoutMs) -> Promise of
 * { allReduce(address, count, dtypeCode, mean): Promise, broadcast(address, bytes, root): Promise, close() }.
 */
Napi::Value open_nccl(const Napi::CallbackInfo& info, std::shared_ptr<Device> device);

}  // namespace kiln::addon
