import { DeviceError } from "@kiln/contract";
import { platform } from "#platform";

/**
 * Which SIMD flavour this engine runs: relaxed SIMD (fused f32x4 multiply-add)
 * where the engine validates it, plain SIMD otherwise.
 */
export type SimdVariant = "relaxed" | "plain";

/** The smallest module using f32x4.relaxed_madd: (func (result v128) (relaxed_madd (v128.const 0) x3)). */
function relaxedProbe(): Uint8Array<ArrayBuffer> {
  const zeroV128 = [0xfd, 0x0c, ...new Array<number>(16).fill(0)]; // v128.const 0
  const body = [0x00, ...zeroV128, ...zeroV128, ...zeroV128, 0xfd, 0x85, 0x02, 0x0b]; // relaxed_madd = 0xfd 0x105
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
    0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // type section: () -> v128
    0x03, 0x02, 0x01, 0x00, // function section: one function of type 0
    0x0a, body.length + 2, 0x01, body.length, ...body, // code section
  ]);
}

/** The smallest module using v128 at all: (func (result v128) (v128.const 0)). */
function simdProbe(): Uint8Array<ArrayBuffer> {
  const body = [0x00, 0xfd, 0x0c, ...new Array<number>(16).fill(0), 0x0b];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b,
    0x03, 0x02, 0x01, 0x00,
    0x0a, body.length + 2, 0x01, body.length, ...body,
  ]);
}

export function hasWasmSimd(): boolean {
  return typeof WebAssembly === "object" && WebAssembly.validate(simdProbe());
}

/**
 * Whether the engine validates relaxed SIMD. With `mayEnable`, Node 20's V8
 * first gets --experimental-wasm-relaxed-simd (process-wide, workers included;
 * setting it before the first relaxed module is compiled is enough).
 */
export function hasRelaxedSimd(mayEnable: boolean): boolean {
  if (typeof WebAssembly !== "object") return false;
  if (WebAssembly.validate(relaxedProbe())) return true;
  if (!mayEnable) return false;
  platform.enableRelaxedSimd();
  return WebAssembly.validate(relaxedProbe());
}

/**
 * Resolves "auto" to the best variant the engine supports; an explicit request the engine lacks is refused.
 * `setV8Flag: false` never sets a V8 flag: relaxed only where the engine already validates it.
 */
export function chooseSimdVariant(requested: SimdVariant | "auto", setV8Flag = true): SimdVariant {
  if (!hasWasmSimd()) {
    throw new DeviceError("this JavaScript engine has no WebAssembly SIMD", {
      where: "@kiln/kernels-wasm",
      hint: "use Node >= 16.4, Chrome >= 91, Firefox >= 89 or Safari >= 16.4",
    });
  }
  if (requested === "plain") return "plain";
  const relaxed = hasRelaxedSimd(setV8Flag);
  if (requested === "relaxed" && !relaxed) {
    throw new DeviceError("relaxed SIMD was requested but this engine does not validate f32x4.relaxed_madd", {
      where: "@kiln/kernels-wasm",
      hint: 'pass simd: "auto" or "plain" (Node 20 gets relaxed SIMD from --experimental-wasm-relaxed-simd, which setV8Flag: false forbids)',
    });
  }
  return relaxed ? "relaxed" : "plain";
}
