import type { Backend } from "../backend.js";
import type { KernelArgsMap, KernelName, Kernels } from "../kernels/index.js";

/**
 * `backend` with every kernel call made through `prepare` and then issued: the
 * conformance suite on the path compiled steps take. Preparing a call reserves the
 * kernel scratch it needs, so issuing it must leave memoryStats().kernelScratchBytes as
 * it was; a call that grows it throws, naming the kernel and both sizes. A backend
 * without `prepare` is returned as it is.
 */
export function throughPrepare(backend: Backend): Backend {
  const prepare = backend.prepare?.bind(backend);
  if (!prepare) return backend;
  const scratch = () => backend.memoryStats().kernelScratchBytes ?? 0;
  const kernels = new Proxy(backend.kernels, {
    get: (target, name) =>
      typeof name === "string" && name in target
        ? (args: KernelArgsMap[KernelName]) => {
            const run = prepare(name as KernelName, args);
            const reserved = scratch();
            run();
            if (scratch() !== reserved) throw new Error(`${name} took ${scratch()} bytes of kernel scratch when issued; preparing it reserved ${reserved}`);
          }
        : undefined,
  }) as Kernels;
  return new Proxy(backend, {
    get: (target, key) => {
      if (key === "kernels") return kernels;
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
