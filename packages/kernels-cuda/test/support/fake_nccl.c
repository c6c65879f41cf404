/* fake_nccl.c: a stand-in for libnccl.so.2 that the NCCL tests build with
 * `cc -shared -fPIC` (no GPU, no NCCL needed). It runs on the simulator, whose device
 * pointers are host memory, and does each collective at the call.
 *
 * Knobs, all given when it is compiled (so one process can load several fakes):
 *   -DFAKE_NCCL_VERSION=23007       what ncclGetVersion reports (NCCL's encoding)
 *   -DFAKE_NCCL_WITHOUT_ASYNC_ERROR leaves out ncclCommGetAsyncError (a library missing a symbol)
 *   -DFAKE_NCCL_LOG='"file"'        appends one line per call (the tests read the arguments back)
 *   -DFAKE_NCCL_FAIL_ENQUEUE        every collective returns ncclSystemError
 *   -DFAKE_NCCL_ASYNC=1             after a collective, ncclCommGetAsyncError says ncclInProgress for ever
 *   -DFAKE_NCCL_ASYNC=2             after a collective, ncclCommGetAsyncError says ncclRemoteError
 *   -DFAKE_NCCL_WAIT_SECONDS=60     how long a rank waits for the others (to join, at a collective)
 *
 * World size 1: a sum or mean over one rank, or a broadcast, leaves the data as it is.
 * World size N > 1 (the ranks in separate processes): the ranks meet in a POSIX shared
 * memory segment named by the unique id; each collective copies every rank's data
 * into its slot there, waits for all (a barrier), and each rank reduces the slots in
 * rank order (f32 accumulation), so every rank gets the same bits. Reduce-scatter
 * and all-gather take NCCL's in-place forms as well as separate buffers. The call returns
 * when the collective is done: the simulator has no asynchronous device.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

#define SLOT_BYTES (size_t)(4u << 20) /* the most one rank brings to one collective */
#define MAX_RANKS 16
#ifndef FAKE_NCCL_WAIT_SECONDS
#define FAKE_NCCL_WAIT_SECONDS 60
#endif
#define WAIT_SECONDS FAKE_NCCL_WAIT_SECONDS /* a rank missing for this long fails the call */

/* The segment the ranks share (world size > 1). */
struct shared {
  int joined;     /* ranks that have mapped it */
  int arrived;    /* ranks at the current barrier */
  int generation; /* bumped each time a barrier releases */
  char pad[64 - 3 * sizeof(int)];
  unsigned char slots[]; /* nranks * SLOT_BYTES */
};

struct ncclComm {
  int rank, nranks;
  int issued; /* collectives issued so far */
  struct shared* shm;
  size_t shm_bytes;
};

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void pause_briefly(void) {
  struct timespec ts = {0, 50 * 1000};
  nanosleep(&ts, NULL);
}

/* Every rank waits here until all have arrived; remote_error when one does not come. */
static int barrier(struct ncclComm* c) {
  if (c->nranks == 1) return 0;
  struct shared* s = c->shm;
  int generation = __atomic_load_n(&s->generation, __ATOMIC_ACQUIRE);
  if (__atomic_add_fetch(&s->arrived, 1, __ATOMIC_ACQ_REL) == c->nranks) {
    __atomic_store_n(&s->arrived, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->generation, 1, __ATOMIC_RELEASE);
    return 0;
  }
  double deadline = now_seconds() + WAIT_SECONDS;
  while (__atomic_load_n(&s->generation, __ATOMIC_ACQUIRE) == generation) {
    if (now_seconds() > deadline) return 6; /* ncclRemoteError */
    pause_briefly();
  }
  return 0;
}

static unsigned char* slot(struct ncclComm* c, int rank) { return c->shm->slots + (size_t)rank * SLOT_BYTES; }

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
  if (nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks) return invalid_argument;
  struct ncclComm* c = calloc(1, sizeof *c);
  if (!c) return system_error;
  c->rank = rank;
  c->nranks = nranks;
  if (nranks > 1) {
    char name[160];
    snprintf(name, sizeof name, "/%.120s", id.internal);
    int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
    c->shm_bytes = sizeof(struct shared) + (size_t)nranks * SLOT_BYTES;
    if (fd < 0 || ftruncate(fd, (off_t)c->shm_bytes) != 0) {
      if (fd >= 0) close(fd);
      free(c);
      return system_error;
    }
    c->shm = mmap(NULL, c->shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (c->shm == MAP_FAILED) {
      free(c);
      return system_error;
    }
    __atomic_add_fetch(&c->shm->joined, 1, __ATOMIC_ACQ_REL);
    double deadline = now_seconds() + WAIT_SECONDS;
    while (__atomic_load_n(&c->shm->joined, __ATOMIC_ACQUIRE) < nranks) {
      if (now_seconds() > deadline) {
        shm_unlink(name);
        munmap(c->shm, c->shm_bytes);
        free(c);
        return remote_error;
      }
      pause_briefly();
    }
    if (rank == 0) shm_unlink(name); /* every rank has it mapped now */
  }
  log_line("init rank=%d nranks=%d", rank, nranks);
  *comm = c;
  return ok;
}

static int valid_float_type(int t) { return t == type_f16 || t == type_f32 || t == type_bf16; }

static float load(const unsigned char* p, size_t i, int type) {
  if (type == type_f32) {
    float f;
    memcpy(&f, p + 4 * i, 4);
    return f;
  }
  if (type == type_f16) {
    _Float16 h;
    memcpy(&h, p + 2 * i, 2);
    return (float)h;
  }
  uint16_t b;
  memcpy(&b, p + 2 * i, 2);
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static void store(unsigned char* p, size_t i, int type, float f) {
  if (type == type_f32) {
    memcpy(p + 4 * i, &f, 4);
  } else if (type == type_f16) {
    _Float16 h = (_Float16)f;
    memcpy(p + 2 * i, &h, 2);
  } else { /* bf16, rounded to nearest even */
    uint32_t bits;
    memcpy(&bits, &f, 4);
    uint16_t b = (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
    memcpy(p + 2 * i, &b, 2);
  }
}

int ncclAllReduce(const void* send, void* recv, size_t count, int type, int op, struct ncclComm* c, void* stream) {
  if (!c) return invalid_argument;
  if (!valid_float_type(type) || (op != op_sum && op != op_avg)) return invalid_argument;
  log_line("allReduce count=%zu type=%d op=%d inplace=%d stream=%s", count, type, op, send == recv, stream ? "set" : "null");
  if (FAIL_ENQUEUE) return system_error;
  size_t bytes = count * (type == type_f32 ? 4 : 2);
  c->issued++;
  if (c->nranks == 1) {
    if (send != recv) memcpy(recv, send, bytes);
    return ok;
  }
  if (bytes > SLOT_BYTES) return invalid_argument;
  memcpy(slot(c, c->rank), send, bytes);
  int r = barrier(c);
  if (r) return r;
  for (size_t i = 0; i < count; i++) {
    float acc = 0.f;
    for (int k = 0; k < c->nranks; k++) acc += load(slot(c, k), i, type);
    store(recv, i, type, op == op_avg ? acc / (float)c->nranks : acc);
  }
  return barrier(c); /* nobody refills a slot before every rank has read it */
}

int ncclBroadcast(const void* send, void* recv, size_t count, int type, int root, struct ncclComm* c, void* stream) {
  if (!c) return invalid_argument;
  if (type != type_int8 || root < 0 || root >= c->nranks) return invalid_argument;
  log_line("broadcast count=%zu type=%d root=%d inplace=%d stream=%s", count, type, root, send == recv, stream ? "set" : "null");
  if (FAIL_ENQUEUE) return system_error;
  c->issued++;
  if (c->nranks == 1) {
    if (send != recv) memcpy(recv, send, count);
    return ok;
  }
  if (count > SLOT_BYTES) return invalid_argument;
  if (c->rank == root) memcpy(slot(c, root), send, count);
  int r = barrier(c);
  if (r) return r;
  if (c->rank != root) memcpy(recv, slot(c, root), count);
  else if (send != recv) memcpy(recv, send, count);
  return barrier(c);
}

static size_t type_bytes(int type) { return type == type_f32 ? 4 : type == type_int8 ? 1 : 2; }

/* send: nranks chunks of `count` elements; recv: `count` elements, the sum (or mean) of
 * every rank's chunk `rank`. In place when recv is this rank's chunk of send. */
int ncclReduceScatter(const void* send, void* recv, size_t count, int type, int op, struct ncclComm* c, void* stream) {
  if (!c) return invalid_argument;
  if (!valid_float_type(type) || (op != op_sum && op != op_avg)) return invalid_argument;
  size_t chunk = count * type_bytes(type);
  int inplace = (const unsigned char*)send + (size_t)c->rank * chunk == (unsigned char*)recv;
  log_line("reduceScatter count=%zu type=%d op=%d inplace=%d stream=%s", count, type, op, inplace, stream ? "set" : "null");
  if (FAIL_ENQUEUE) return system_error;
  c->issued++;
  if (c->nranks == 1) {
    if (send != recv) memcpy(recv, send, chunk);
    return ok;
  }
  if (chunk * (size_t)c->nranks > SLOT_BYTES) return invalid_argument;
  memcpy(slot(c, c->rank), send, chunk * (size_t)c->nranks);
  int r = barrier(c);
  if (r) return r;
  for (size_t i = 0; i < count; i++) {
    float acc = 0.f;
    for (int k = 0; k < c->nranks; k++) acc += load(slot(c, k) + (size_t)c->rank * chunk, i, type);
    store(recv, i, type, op == op_avg ? acc / (float)c->nranks : acc);
  }
  return barrier(c);
}

/* send: `count` elements; recv: nranks chunks of `count`, chunk k rank k's send. In
 * place when send is this rank's chunk of recv. */
int ncclAllGather(const void* send, void* recv, size_t count, int type, struct ncclComm* c, void* stream) {
  if (!c) return invalid_argument;
  if (type != type_int8 && !valid_float_type(type)) return invalid_argument;
  size_t chunk = count * type_bytes(type);
  int inplace = (unsigned char*)recv + (size_t)c->rank * chunk == (const unsigned char*)send;
  log_line("allGather count=%zu type=%d inplace=%d stream=%s", count, type, inplace, stream ? "set" : "null");
  if (FAIL_ENQUEUE) return system_error;
  c->issued++;
  if (c->nranks == 1) {
    if (!inplace) memcpy(recv, send, chunk);
    return ok;
  }
  if (chunk > SLOT_BYTES) return invalid_argument;
  memcpy(slot(c, c->rank), send, chunk);
  int r = barrier(c);
  if (r) return r;
  for (int k = 0; k < c->nranks; k++) memcpy((unsigned char*)recv + (size_t)k * chunk, slot(c, k), chunk);
  return barrier(c);
}

static void release(struct ncclComm* c) {
  if (c->shm) munmap(c->shm, c->shm_bytes);
  free(c);
}

int ncclCommDestroy(struct ncclComm* c) {
  log_line("destroy");
  release(c);
  return ok;
}

int ncclCommAbort(struct ncclComm* c) {
  log_line("abort");
  release(c);
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
