export { buildProgram, main } from "./main.js";
export { gatherDoctorReport, type DoctorReport } from "./doctor/gather.js";
export { formatDoctorReport } from "./doctor/format.js";
