/** What a system error code means for a file kiln reads or writes, and what to do about it. */
export interface ErrnoMeaning {
  /** Said of the file that could not be read, after its description: "token file" + " not found". */
  readonly read?: string;
  readonly readHint?: string;
  /** Why a write failed, after "cannot write <the file>: ". */
  readonly write?: string;
  readonly writeHint?: string;
}

const PERMISSION = {
  read: "is not readable (permission denied)",
  readHint: "Fix its permissions.",
  write: "output directory is not writable (permission denied)",
  writeHint: "Fix its permissions, or write somewhere you can.",
};

/**
 * Every file error code kiln explains, by code: each reader and writer words its
 * messages from here (fileReadError, fileWriteError). A code that is not here is
 * reported with the system's own message.
 */
export const ERRNO_TABLE: Readonly<Record<string, ErrnoMeaning>> = {
  ENOENT: {
    read: "not found",
    readHint: "Check the path.",
    write: "output directory does not exist",
    writeHint: "Create it first, or choose another output path.",
  },
  ENOTDIR: {
    read: "not found: a file stands where its path needs a directory",
    readHint: "Check the path.",
    write: "a parent of the output path is a file, not a directory",
    writeHint: "Choose an output path inside a directory.",
  },
  EEXIST: {
    write: "a file is in the way: the output path, or a parent of it, is a file, not a directory",
    writeHint: "Choose an output path inside a directory.",
  },
  EISDIR: {
    read: "path is a directory",
    readHint: "Give the path of a file, not a directory.",
    write: "output path is a directory",
    writeHint: "Give a file name, not a directory.",
  },
  EACCES: PERMISSION,
  EPERM: PERMISSION,
  EROFS: {
    write: "output directory is on a read-only file system",
    writeHint: "Choose an output directory on a writable disk.",
  },
  ENOSPC: {
    write: "disk full while writing",
    writeHint: "Free disk space, or write to another disk.",
  },
  EDQUOT: {
    write: "disk quota exceeded while writing",
    writeHint: "Free space within your quota, or write to another disk.",
  },
  EFBIG: {
    write: "the file grew past the largest size the file system takes",
    writeHint: "Write to a file system that takes larger files.",
  },
  EMFILE: {
    read: "cannot be opened: this process has too many files open",
    readHint: "Raise the open-file limit (ulimit -n), then try again.",
    write: "this process has too many files open",
    writeHint: "Raise the open-file limit (ulimit -n), then try again.",
  },
  ENFILE: {
    read: "cannot be opened: the system has too many files open",
    readHint: "Close other programs' files, or raise the system's open-file limit, then try again.",
    write: "the system has too many files open",
    writeHint: "Close other programs' files, or raise the system's open-file limit, then try again.",
  },
  EIO: {
    read: "cannot be read: input/output error from the disk",
    readHint: "Check the disk's health (dmesg shows what the kernel saw), then try again.",
    write: "input/output error from the disk",
    writeHint: "Check the disk's health (dmesg shows what the kernel saw), then try again.",
  },
  ENAMETOOLONG: {
    read: "cannot be opened: a name in its path is too long",
    readHint: "Use a shorter path.",
    write: "a name in the output path is too long",
    writeHint: "Choose a shorter output path.",
  },
  ELOOP: {
    read: "cannot be opened: its path loops through symbolic links",
    readHint: "Check the symbolic links along the path.",
    write: "the output path loops through symbolic links",
    writeHint: "Check the symbolic links along the path.",
  },
  ERR_FS_FILE_TOO_LARGE: {
    read: "is too large to read into memory at once",
    readHint: "Read it in parts.",
  },
};

/** The `code` of a Node system error (ENOENT, EACCES, ...), if it has one. */
export function errorCode(err: unknown): string | undefined {
  return typeof err === "object" && err !== null && "code" in err ? String((err as { code: unknown }).code) : undefined;
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
