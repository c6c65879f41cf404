// The page starts one module Worker that runs the kernels (a page's main thread may not block in Atomics.wait).
const worker = new Worker(new URL("./kernels-worker.js", import.meta.url), { type: "module" });
worker.onmessage = ({ data }) => {
  document.querySelector("#out").textContent = JSON.stringify(data, null, 2);
  globalThis.kilnResult = data;
};
