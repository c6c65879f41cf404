export { ERRNO_TABLE, errorCode, messageOf, type ErrnoMeaning } from "./errno-table.js";
export { fileReadError, fileWriteError, type FileErrorClass, type FileErrorContext } from "./file-errors.js";
export { AtomicOutputFile, writeDirectoryAtomically, writeFileAtomically, writeFileAtomicallySync, type AtomicWriteOptions, type FileContent } from "./write-atomically.js";
export { RecordLogFile } from "./record-log-file.js";
