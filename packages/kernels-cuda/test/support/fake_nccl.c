/* fake_nccl.c: a stand-in for libnccl.so.2 that the NCCL tests build with
 * `cc -shared -fPIC` (no GPU, no NCCL needed). It runs on the simulator, whose device
 * pointers are host memory, and does each collective at the call.
 *
 * Knobs, all given when it is compiled (so one process can load several fakes):
 *   -DFAKE_NCCL_VERSION=23007       what ncclGetVersion reports (NCCL's encoding)
 *   -DFAKE_NCCL_WITHOUT_ASYNC_ERROR leaves out ncclCommGetAsyncError (a library missing a symbol)
 *   -DFAKE_NCCL_LOG='"file"'        appends one line per call (the tests read the arguments back)
 *   -DFAKE_NCCL_FAIL_ENQUEUE        ncclAllReduce/ncclBroadcast return ncclSystemError
 *   -DFAKE_NCCL_ASYNC=1             after a collective, ncclCommGetAsyncError says ncclInProgress for ever
 *   -DFAKE_NCCL_ASYNC=2             after a collective, ncclCommGetAsyncError says ncclRemoteError
 *
 * World size 1 only: a sum or mean over one rank, or a broadcast, leaves the data as it is.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef FAKE_NCCL_VERSION
#define FAKE_NCCL_VERSION 23007
#endif
#ifndef FAKE_NCCL_LOG
#define FAKE_NCCL_LOG ""
#endif
#ifndef FAKE_NCCL_ASYNC
#define FAKE_NCCL_ASYNC 0
#endif
#ifdef FAKE_NCCL_FAIL_ENQUEUE
#define FAIL_ENQUEUE 1
#else
#define FAIL_ENQUEUE 0
#endif

enum { ok = 0, system_error = 2, internal_error = 3, invalid_argument = 4, invalid_usage = 5, remote_error = 6, in_progress = 7 };
enum { type_int8 = 0, type_f16 = 6, type_f32 = 7, type_bf16 = 9 };
enum { op_sum = 0, op_avg = 4 };

typedef struct { char internal[128]; } ncclUniqueId;

struct ncclComm {
  int rank, nranks;
  int issued; /* collectives issued so far */
};

static void log_line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char* fmt, ...) {
  if (!FAKE_NCCL_LOG[0]) return;
  FILE* f = fopen(FAKE_NCCL_LOG, "a");
  if (!f) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}

int ncclGetVersion(int* version) {
  *version = FAKE_NCCL_VERSION;
  return ok;
}

int ncclGetUniqueId(ncclUniqueId* id) {
  static unsigned counter;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "fake-nccl-%ld-%u-%ld", (long)getpid(), ++counter, (long)ts.tv_nsec);
  return ok;
}

int ncclCommInitRank(struct ncclComm** comm, int nranks, ncclUniqueId id, int rank) {
  if (strncmp(id.internal, "fake-nccl-", 10) != 0) return invalid_argument;
  if (nranks != 1 || rank != 0) return invalid_usage;
  struct ncclComm* c = calloc(1, sizeof *c);
  if (!c) return system_error;
  c->rank = rank;
  c->nranks = nranks;
  log_line("init rank=%d nranks=%d", rank, nranks);
  *comm = c;
  return ok;
}

static int valid_float_type(int t) { return t == type_f16 || t == type_f32 || t == type_bf16; }

int ncclAllReduce(const void* send, void* recv, size_t count, int type, int op, struct ncclComm* c, void* stream) {
  if (!c) return invalid_argument;
  if (!valid_float_type(type) || (op != op_sum && op != op_avg)) return invalid_argument;
  log_line("allReduce count=%zu type=%d op=%d inplace=%d stream=%s", count, type, op, send == recv, stream ? "set" : "null");
  if (FAIL_ENQUEUE) return system_error;
  size_t bytes = count * (type == type_f32 ? 4 : 2);
  if (send != recv) memcpy(recv, send, bytes);
  c->issued++;
  return ok;
}

int ncclBroadcast(const void* send, void* recv, size_t count, int type, int root, struct ncclComm* c, void* stream) {
  if (!c) return invalid_argument;
  if (type != type_int8 || root < 0 || root >= c->nranks) return invalid_argument;
  log_line("broadcast count=%zu type=%d root=%d inplace=%d stream=%s", count, type, root, send == recv, stream ? "set" : "null");
  if (FAIL_ENQUEUE) return system_error;
  if (send != recv) memcpy(recv, send, count);
  c->issued++;
  return ok;
}

int ncclCommDestroy(struct ncclComm* c) {
  log_line("destroy");
  free(c);
  return ok;
}

int ncclCommAbort(struct ncclComm* c) {
  log_line("abort");
  free(c);
  return ok;
}

#ifndef FAKE_NCCL_WITHOUT_ASYNC_ERROR
int ncclCommGetAsyncError(struct ncclComm* c, int* state) {
  *state = ok;
  if (c->issued > 0 && FAKE_NCCL_ASYNC == 1) *state = in_progress;
  if (c->issued > 0 && FAKE_NCCL_ASYNC == 2) *state = remote_error;
  return ok;
}
#endif

const char* ncclGetErrorString(int r) {
  switch (r) {
    case ok: return "no error";
    case system_error: return "unhandled system error (fake)";
    case invalid_argument: return "invalid argument (fake)";
    case invalid_usage: return "invalid usage (fake)";
    case remote_error: return "remote process exited or there was a network error (fake)";
    case in_progress: return "NCCL operation in progress";
    default: return "unknown result (fake)";
  }
}
