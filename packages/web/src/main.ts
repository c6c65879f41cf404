import { LossChart } from "./loss-chart.js";
import type { DataChoice, FromWorker, RunState, ToWorker } from "./messages.js";
import { DEFAULT_PRESET, PRESETS } from "./presets.js";
import { parseRunConfig } from "./run-config.js";

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;
const preset = $<HTMLSelectElement>("preset");
const configBox = $<HTMLTextAreaElement>("config");
const stepsBox = $<HTMLInputElement>("steps");
const startButton = $<HTMLButtonElement>("start");
const pauseButton = $<HTMLButtonElement>("pause");
const downloadButton = $<HTMLButtonElement>("download");
const generateButton = $<HTMLButtonElement>("generate");
const chart = new LossChart($("chart"));

/** What the page shows, also read by the browser test. */
const view = {
  device: undefined as Extract<FromWorker, { type: "device" }> | undefined,
  state: "idle" as RunState,
  step: 0,
  maxSteps: 0,
  losses: [] as { step: number; loss: number; "tokens/s": number }[],
  valLosses: [] as { step: number; val_loss: number }[],
  samples: [] as { text: string; tokens: number[] }[],
  errors: [] as string[],
};
(globalThis as { kilnPage?: typeof view }).kilnPage = view;

const worker = new Worker(new URL("./train-worker.ts", import.meta.url), { type: "module" });
const send = (message: ToWorker, transfer: Transferable[] = []) => worker.postMessage(message, transfer);

for (const name of [...Object.keys(PRESETS), "your YAML"]) preset.add(new Option(name, name));
function showPreset(): void {
  const text = PRESETS[preset.value];
  if (text === undefined) return;
  configBox.value = text;
  stepsBox.value = String(parseRunConfig(text).config.maxSteps ?? "");
}
preset.value = DEFAULT_PRESET;
showPreset();
preset.onchange = showPreset;
configBox.oninput = () => {
  preset.value = "your YAML";
};

let textData: DataChoice | undefined;
function useTextFile(file: File): void {
  void file.text().then((text) => {
    textData = { kind: "text", name: file.name, text };
    $("text-name").textContent = `${file.name} (${text.length.toLocaleString("en-US")} characters)`;
    const radio = $<HTMLInputElement>("data-text");
    radio.disabled = false;
    radio.checked = true;
  });
}
$<HTMLInputElement>("text-file").onchange = (e) => {
  const file = (e.target as HTMLInputElement).files?.[0];
  if (file) useTextFile(file);
};
document.body.ondragover = (e) => {
  e.preventDefault();
  document.body.classList.add("dragging");
};
document.body.ondragleave = () => document.body.classList.remove("dragging");
document.body.ondrop = (e) => {
  e.preventDefault();
  document.body.classList.remove("dragging");
  const file = e.dataTransfer?.files[0];
  if (file) useTextFile(file);
};
const dataChoice = (): DataChoice => ($<HTMLInputElement>("data-text").checked && textData ? textData : { kind: "builtin" });

function showError(text: string): void {
  view.errors.push(text);
  $("error").textContent = text;
}

startButton.onclick = () => {
  $("error").textContent = "";
  chart.clear();
  view.losses = [];
  view.valLosses = [];
  const steps = Number(stepsBox.value);
  send({ type: "start", config: configBox.value, data: dataChoice(), ...(Number.isSafeInteger(steps) && steps > 0 ? { steps } : {}) });
};
pauseButton.onclick = () => send({ type: view.state === "paused" ? "resume" : "pause" });
downloadButton.onclick = () => send({ type: "checkpoint" });
generateButton.onclick = () => {
  generateButton.disabled = true;
  const number = (id: string) => Number($<HTMLInputElement>(id).value);
  send({
    type: "sample",
    request: { prompt: $<HTMLInputElement>("prompt").value, maxTokens: number("max-tokens"), temperature: number("temperature"), topK: number("top-k"), seed: number("seed") },
  });
};
$<HTMLInputElement>("upload").onchange = (e) => {
  const input = e.target as HTMLInputElement;
  const file = input.files?.[0];
  if (!file) return;
  void file.arrayBuffer().then((buffer) => {
    chart.clear();
    send({ type: "load", name: file.name, bytes: new Uint8Array(buffer), data: dataChoice() }, [buffer]);
    input.value = "";
  });
};

function showState(): void {
  const s = view.state;
  startButton.disabled = s === "preparing";
  pauseButton.disabled = s !== "training" && s !== "paused";
  pauseButton.textContent = s === "paused" ? "Resume" : "Pause";
  const trained = s === "training" || s === "paused" || s === "done";
  downloadButton.disabled = !trained;
  generateButton.disabled = !trained && s !== "loaded";
  const last = view.losses.at(-1);
  const val = view.valLosses.at(-1);
  $("status").textContent =
    s === "idle" ? "not started" : s === "preparing" ? "tokenizing and planning..." : s === "loaded" ? "trained weights loaded: sample from them below" :
    `${s}: step ${view.step} / ${view.maxSteps}` +
    (last ? `   loss ${last.loss.toFixed(4)}   ${Math.round(last["tokens/s"]).toLocaleString("en-US")} tokens/s` : "") +
    (val ? `   val_loss ${val.val_loss.toFixed(4)} (step ${val.step})` : "");
}

worker.onmessage = ({ data: m }: MessageEvent<FromWorker>) => {
  switch (m.type) {
    case "device": {
      view.device = m;
      const el = $("device");
      el.textContent = `${m.name}: ${m.why}.`;
      el.classList.toggle("single", m.threads === 1);
      break;
    }
    case "state":
      view.state = m.state;
      view.step = m.step;
      view.maxSteps = m.maxSteps;
      break;
    case "log":
      $("log").textContent += `${m.text}\n`;
      break;
    case "metrics":
      view.step = m.line.step;
      view.losses.push({ step: m.line.step, loss: m.line.loss, "tokens/s": m.line["tokens/s"] });
      chart.add("loss", m.line.step, m.line.loss);
      chart.add("tokens/s", m.line.step, m.line["tokens/s"]);
      break;
    case "val":
      view.valLosses.push({ step: m.step, val_loss: m.val_loss });
      chart.add("val_loss", m.step, m.val_loss);
      break;
    case "sample":
      view.samples.push({ text: m.text, tokens: m.tokens });
      $("sample-out").textContent = m.text;
      break;
    case "checkpoint": {
      const url = URL.createObjectURL(new Blob([m.bytes as Uint8Array<ArrayBuffer>], { type: "application/octet-stream" }));
      const a = Object.assign(document.createElement("a"), { href: url, download: m.name });
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      break;
    }
    case "error":
      // As the CLI prints a KilnError.
      showError(`${m.name}${m.where ? ` in ${m.where}` : ""}: ${m.message}${m.hint ? `\n  what to do: ${m.hint}` : ""}`);
      break;
  }
  showState();
};
worker.onerror = (e) => showError(`the training worker failed: ${e.message}`);
