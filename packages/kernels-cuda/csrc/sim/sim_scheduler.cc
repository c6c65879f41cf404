// sim_scheduler.cc: runs a kernel launch on the host. Blocks run one after another
// (forward, or reversed to expose races between blocks); inside a block every thread
// is a fiber, resumed in thread order until it finishes or waits at a barrier. When
// no thread can run, every warp whose live lanes all wait at a warp exchange is
// released (with warps_in_turn only the first such warp, so it runs ahead alone),
// else every warpgroup whose live threads all wait at a warpgroup-collective
// instruction, else the block when all its live threads wait at the same __syncthreads; anything
// else is a divergent barrier or a deadlock, reported with file and line, then abort.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <vector>

#include "cuda_sim.h"
#include "fiber.h"
#include "sim_options.h"

extern "C" char __start_kiln_sim_shared[];  // NOLINT: linker-provided bounds of the section
extern "C" char __stop_kiln_sim_shared[];
// Keeps the section (and so its bounds) present even when no kernel declares __shared__.
__attribute__((section("kiln_sim_shared"), used)) static char g_shared_section_anchor[16];

namespace kiln_sim {

thread_local uint3 g_thread_idx;
thread_local uint3 g_block_idx;
thread_local dim3 g_block_dim;
thread_local dim3 g_grid_dim;
SharedBounds g_shared_bounds{};
bool g_any_landed = false;

namespace {

enum class State { Runnable, AtBlockBarrier, AtWarpBarrier, AtGroupBarrier, Done };

/** One 16-byte cp.async: the source bytes (read at issue, zero past src_bytes) and where they land. */
struct AsyncCopy {
  unsigned char* dst;
  unsigned char data[16];
};

struct SimThread {
  Fiber fiber;
  State state = State::Runnable;
  const char* file = nullptr;
  int line = 0;
  uint3 idx{};
  uint64_t slot[2] = {0, 0};  // shuffles' exchange slots, used in turn (slot_turn)
  unsigned slot_turn = 0;
  alignas(16) unsigned char wide[kWideSlotBytes];  // warp-collective matrix operations
  std::vector<AsyncCopy> open_copies;               // cp.async issued since the last commit
  std::deque<std::vector<AsyncCopy>> groups;        // committed, not yet retired, oldest first
  bool unfenced = false;                            // cp.async bytes landed since the last fence.proxy.async
  std::vector<WgmmaOp> open_wgmma;                  // issued since the last wgmma.commit_group
  std::deque<std::vector<WgmmaOp>> wgmma_groups;    // committed, not yet run, oldest first
};

struct BlockRun {
  std::vector<SimThread> threads;
  unsigned count = 0;
  unsigned done = 0;  // threads that finished
  SimThread* current = nullptr;
  // The scheduler's pass over the threads (in thread order, or reversed) has resumed the
  // thread at this position of the order last; -1 before the pass's first.
  int pass_position = -1;
  Fiber scheduler;
  const std::function<void()>* body = nullptr;
  std::vector<unsigned char> dynamic_smem;
  // For each 16-byte shared granule (the static section's, then the dynamic buffer's),
  // 1 + the thread whose cp.async landed in it at that thread's wait_group, 0 for none:
  // only that thread may read it until the next __syncthreads (checked by ldmatrix and
  // wgmma). `landed` lists the entries set since they were last cleared.
  std::vector<uint32_t> landed_owner;
  std::vector<size_t> landed;
};

BlockRun g_run;
SimOptions g_options;

// landed_owner's layout for the current launch: the static section's granules from
// its 16-aligned start, then the dynamic buffer's.
const unsigned char* g_landed_static_base = nullptr;
const unsigned char* g_landed_dynamic_base = nullptr;
size_t g_landed_static_granules = 0;

/** Sizes landed_owner for this launch's shared memory (entries of earlier launches were cleared at their blocks' ends). */
void layout_landed() {
  const auto align_down = [](const void* p) { return reinterpret_cast<const unsigned char*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{15}); };
  g_landed_static_base = align_down(__start_kiln_sim_shared);
  g_landed_static_granules = static_cast<size_t>(reinterpret_cast<const unsigned char*>(__stop_kiln_sim_shared) - g_landed_static_base + 15) / 16;
  g_landed_dynamic_base = align_down(g_run.dynamic_smem.data());
  const size_t dynamic_granules = static_cast<size_t>(g_run.dynamic_smem.data() + g_run.dynamic_smem.size() - g_landed_dynamic_base + 15) / 16;
  if (g_run.landed_owner.size() < g_landed_static_granules + dynamic_granules) g_run.landed_owner.resize(g_landed_static_granules + dynamic_granules, 0);
}

/** The landed_owner entry of the granule holding p, or nullptr when p is not in shared memory. */
uint32_t* landed_entry(const void* p) {
  const auto* c = static_cast<const unsigned char*>(p);
  const SharedBounds& b = g_shared_bounds;
  if (c >= b.static_begin && c < b.static_end) return &g_run.landed_owner[static_cast<size_t>(c - g_landed_static_base) / 16];
  if (c >= b.dynamic_begin && c < b.dynamic_end) return &g_run.landed_owner[g_landed_static_granules + static_cast<size_t>(c - g_landed_dynamic_base) / 16];
  return nullptr;
}

void clear_landed() {
  for (size_t i : g_run.landed) g_run.landed_owner[i] = 0;
  g_run.landed.clear();
  g_any_landed = false;
}

/** Issued operations since the last commit become the newest group. */
template <typename Op>
void commit_group(std::vector<Op>& open, std::deque<std::vector<Op>>& groups) {
  groups.push_back(std::move(open));
  open.clear();
}

/** Retires the oldest groups, `each` on every operation, until at most `pending` remain. */
template <typename Op, typename F>
void retire_groups(std::deque<std::vector<Op>>& groups, unsigned pending, F&& each) {
  while (groups.size() > pending) {
    for (const Op& op : groups.front()) each(op);
    groups.pop_front();
  }
}

/** The next runnable thread of the pass, made current; nullptr at the pass's end. */
SimThread* advance_pass() {
  const int n = static_cast<int>(g_run.count);
  for (int j = g_run.pass_position + 1; j < n; j++) {
    SimThread& t = g_run.threads[g_options.reverse_threads ? n - 1 - j : j];
    if (t.state != State::Runnable) continue;
    g_run.pass_position = j;
    g_run.current = &t;
    g_thread_idx = t.idx;
    return &t;
  }
  g_run.pass_position = n;
  return nullptr;
}

/**
 * Suspends the running thread and resumes the next runnable one of the pass, straight
 * from fiber to fiber (one stack switch, not two through the scheduler), or the
 * scheduler at the pass's end. Only a thread changes its own state, so the runnable
 * threads ahead in the pass are the ones the scheduler would have resumed.
 */
void switch_to_next(SimThread* from) {
  SimThread* next = advance_pass();
  fiber_switch(from->fiber, next ? next->fiber : g_run.scheduler);
}

void thread_entry() {
  fiber_started();
  (*g_run.body)();
  if (!g_run.current->open_wgmma.empty() || !g_run.current->wgmma_groups.empty()) {
    const WgmmaOp& op = g_run.current->open_wgmma.empty() ? g_run.current->wgmma_groups.front().front() : g_run.current->open_wgmma.front();
    char msg[1024];
    std::snprintf(msg, sizeof msg, "thread %u exits with the wgmma at %s:%d still in flight (no wgmma.wait_group retired it)",
                  static_cast<unsigned>(g_run.current - g_run.threads.data()), op.file, op.line);
    fail(msg);
  }
  g_run.current->state = State::Done;
  g_run.done++;
  switch_to_next(g_run.current);
  fail("a finished thread was resumed");
}

void yield_as(State s, const char* file, int line) {
  SimThread* t = g_run.current;
  t->state = s;
  t->file = file;
  t->line = line;
  switch_to_next(t);
}

unsigned thread_index() { return static_cast<unsigned>(g_run.current - g_run.threads.data()); }

/** Threads [begin, end) waiting at `at` go on when every live one of them waits there; whether they did. */
bool release_if_all_wait(unsigned begin, unsigned end, State at) {
  unsigned waiting = 0, live = 0;
  for (unsigned i = begin; i < end; i++) {
    if (g_run.threads[i].state == State::Done) continue;
    live++;
    if (g_run.threads[i].state == at) waiting++;
  }
  if (live == 0 || waiting != live) return false;
  for (unsigned i = begin; i < end; i++)
    if (g_run.threads[i].state == at) g_run.threads[i].state = State::Runnable;
  return true;
}

/** Releases what can be released; false when nothing could (a deadlock). */
bool release_barriers() {
  bool released = false;
  const unsigned n = g_run.count, warps = (n + 31) / 32;
  for (unsigned j = 0; j < warps && !(released && g_options.warps_in_turn); j++) {
    const unsigned w = 32 * (g_options.reverse_threads ? warps - 1 - j : j);
    released |= release_if_all_wait(w, w + 32 < n ? w + 32 : n, State::AtWarpBarrier);
  }
  if (released) return true;
  for (unsigned w = 0; w < n; w += 128) released |= release_if_all_wait(w, w + 128 < n ? w + 128 : n, State::AtGroupBarrier);
  if (released) return true;
  SimThread* first = nullptr;
  for (unsigned i = 0; i < n; i++) {
    SimThread& t = g_run.threads[i];
    if (t.state == State::Done) continue;
    if (t.state != State::AtBlockBarrier) return false;
    if (!first) {
      first = &t;
    } else if (t.line != first->line || (t.file != first->file && std::strcmp(t.file, first->file) != 0)) {
      char msg[1024];
      std::snprintf(msg, sizeof msg, "divergent __syncthreads: thread %u waits at %s:%d, thread %u at %s:%d", static_cast<unsigned>(first - g_run.threads.data()),
                    first->file, first->line, i, t.file, t.line);
      fail(msg);
    }
  }
  if (!first) return false;
  for (unsigned i = 0; i < n; i++)
    if (g_run.threads[i].state == State::AtBlockBarrier) g_run.threads[i].state = State::Runnable;
  clear_landed();  // the barrier makes every landed copy visible to the block
  return true;
}

void report_deadlock() {
  char msg[2048];
  int len = std::snprintf(msg, sizeof msg, "deadlock: no thread can run;");
  for (unsigned i = 0; i < g_run.count && len < 1900; i++) {
    const SimThread& t = g_run.threads[i];
    if (t.state == State::Done) continue;
    const char* at = t.state == State::AtWarpBarrier ? "a warp exchange" : t.state == State::AtGroupBarrier ? "a warpgroup instruction" : "__syncthreads";
    len += std::snprintf(msg + len, sizeof msg - len, " thread %u waits at %s %s:%d;", i, at, t.file, t.line);
  }
  fail(msg);
}

// Poisoning the static shared section. It holds every kernel's arrays (2+ MB, one copy
// per template instance) while a kernel writes a few KB of it, so instead of the whole
// section before every block: between launches every byte of the section is 0xFF; a
// kernel's span is the range of it the kernel was seen to write; before each block
// but a launch's first the span is poisoned again. A kernel's first launch learns the
// span by scanning the section after every block (whose bytes outside the span are
// still 0xFF: what is not poison was written by that block); each later launch scans
// the section outside the span once at its end and widens the span to what it finds
// (a block that wrote outside the span was followed, in that launch only, by blocks
// that saw its bytes there unpoisoned). At a launch's end the span is poisoned again.
struct PoisonSpan {
  size_t begin = 0, end = 0;  // byte offsets into the section, 16-aligned; empty when equal
  bool learnt = false;
};
std::unordered_map<const void*, PoisonSpan> g_spans;
bool g_section_poisoned = false;

unsigned char* section() { return reinterpret_cast<unsigned char*>(__start_kiln_sim_shared); }
size_t section_bytes() { return static_cast<size_t>(__stop_kiln_sim_shared - __start_kiln_sim_shared); }
/** The section in 16-byte granules from its start (16-aligned, as its arrays are); the last may be short. */
size_t section_granule_bytes() { return (section_bytes() + 15) & ~size_t{15}; }

/** Whether the granule (16 bytes, fewer at the section's end) at offset `off` is all 0xFF. */
bool granule_is_poison(size_t off) {
  const unsigned char* p = section() + off;
  const size_t n = std::min<size_t>(16, section_bytes() - off);
  if (n < 16) return std::all_of(p, p + n, [](unsigned char c) { return c == 0xFF; });
  uint64_t a, b;
  std::memcpy(&a, p, 8);
  std::memcpy(&b, p + 8, 8);
  return (a & b) == ~uint64_t{0};
}

/** Whether the 64 bytes at `off` (4 whole granules inside the section) are all 0xFF. */
bool block_is_poison(size_t off) {
  uint64_t w[8];
  std::memcpy(w, section() + off, 64);
  uint64_t all = ~uint64_t{0};
  for (uint64_t x : w) all &= x;  // one AND over 64 bytes: the scan runs at memory speed
  return all == ~uint64_t{0};
}

/** Widens `span` to cover every granule of [from, to) (16-aligned offsets) holding a non-0xFF byte. */
void widen_to_written(PoisonSpan& span, size_t from, size_t to) {
  // Whole 64-byte blocks first, then granule by granule; only the section's last granule may be short.
  const size_t whole = section_bytes() & ~size_t{15};
  size_t lo = from;
  while (lo + 64 <= std::min(to, whole) && block_is_poison(lo)) lo += 64;
  while (lo < to && granule_is_poison(lo)) lo += 16;
  if (lo >= to) return;
  size_t hi = to;
  while (hi > whole && granule_is_poison(hi - 16)) hi -= 16;  // the short last granule
  while (hi <= whole && hi > lo + 64 && block_is_poison(hi - 64)) hi -= 64;
  while (granule_is_poison(hi - 16)) hi -= 16;
  if (span.begin == span.end) {
    span.begin = lo;
    span.end = hi;
  } else {
    span.begin = std::min(span.begin, lo);
    span.end = std::max(span.end, hi);
  }
}

/** Widens `span` to what was written outside it. */
void widen_outside(PoisonSpan& span) {
  const size_t all = section_granule_bytes();
  if (span.begin == span.end) return widen_to_written(span, 0, all);
  const size_t begin = span.begin, end = span.end;
  widen_to_written(span, 0, begin);
  widen_to_written(span, end, all);
}

void poison(const PoisonSpan& span) { std::memset(section() + span.begin, 0xFF, std::min(span.end, section_bytes()) - span.begin); }

void run_block(unsigned threads) {
  std::memset(g_run.dynamic_smem.data(), 0xFF, g_run.dynamic_smem.size());
  clear_landed();
  for (unsigned i = 0; i < threads; i++) {
    SimThread& t = g_run.threads[i];
    t.state = State::Runnable;
    t.slot_turn = 0;
    t.idx = uint3{i % g_block_dim.x, (i / g_block_dim.x) % g_block_dim.y, i / (g_block_dim.x * g_block_dim.y)};
    // Copies a thread left outstanding when it exited never land (nothing could read them).
    t.open_copies.clear();
    t.groups.clear();
    t.unfenced = false;
    t.open_wgmma.clear();
    t.wgmma_groups.clear();
    fiber_init(t.fiber, thread_entry);
  }
  g_run.done = 0;
  for (;;) {
    // A pass: every runnable thread in order, each handing over to the next when it waits or finishes.
    g_run.pass_position = -1;
    if (SimThread* first = advance_pass()) fiber_switch(g_run.scheduler, first->fiber);
    if (g_run.done == threads) return;
    if (!release_barriers()) report_deadlock();
  }
}

}  // namespace

void fail(const char* what) {
  std::fprintf(stderr, "cuda-sim: %s (block %u,%u,%u)\n", what, g_block_idx.x, g_block_idx.y, g_block_idx.z);
  std::fflush(stderr);
  std::abort();
}

void set_options(const SimOptions& options) { g_options = options; }
SimOptions options() { return g_options; }

namespace {
std::vector<std::function<void()>>* g_recording = nullptr;
}  // namespace

void record_launches(std::vector<std::function<void()>>* into) { g_recording = into; }

void launch(const void* kernel, dim3 grid, dim3 block, size_t dynamic_smem_bytes, const std::function<void()>& body) {
  const unsigned threads = block.x * block.y * block.z;
  if (threads == 0 || threads > 1024) fail("a block must have between 1 and 1024 threads");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) fail("a grid must have at least one block");
  if (grid.y > 65535 || grid.z > 65535) fail("gridDim.y and gridDim.z must be <= 65535");
  if (grid.y > g_options.max_grid_y) fail("gridDim.y is above the limit the simulator was given (maxGridY): a launch that should split did not");
  if (g_recording) {
    g_recording->push_back([kernel, grid, block, dynamic_smem_bytes, body]() { launch(kernel, grid, block, dynamic_smem_bytes, body); });
    return;
  }
  if (g_run.threads.size() < threads) g_run.threads.resize(threads);
  g_run.count = threads;
  g_run.body = &body;
  g_run.dynamic_smem.assign(dynamic_smem_bytes, 0xFF);
  g_shared_bounds = SharedBounds{reinterpret_cast<const unsigned char*>(__start_kiln_sim_shared), reinterpret_cast<const unsigned char*>(__stop_kiln_sim_shared),
                                 g_run.dynamic_smem.data(), g_run.dynamic_smem.data() + g_run.dynamic_smem.size()};
  layout_landed();
  g_grid_dim = grid;
  g_block_dim = block;
  if (!g_section_poisoned) {
    std::memset(section(), 0xFF, section_bytes());
    g_section_poisoned = true;
  }
  PoisonSpan& span = g_spans[kernel];
  const size_t blocks = static_cast<size_t>(grid.x) * grid.y * grid.z;
  for (size_t j = 0; j < blocks; j++) {
    size_t b = g_options.reverse_blocks ? blocks - 1 - j : j;
    g_block_idx = uint3{static_cast<unsigned>(b % grid.x), static_cast<unsigned>((b / grid.x) % grid.y), static_cast<unsigned>(b / (static_cast<size_t>(grid.x) * grid.y))};
    if (j > 0) poison(span);
    run_block(threads);
    if (!span.learnt) widen_outside(span);
  }
  if (span.learnt) widen_outside(span);
  span.learnt = true;
  poison(span);
  g_run.current = nullptr;
  g_run.body = nullptr;
}

void* dynamic_shared_memory() { return g_run.dynamic_smem.data(); }

void sync_block(const char* file, int line) { yield_as(State::AtBlockBarrier, file, line); }
void sync_warp(const char* file, int line) { yield_as(State::AtWarpBarrier, file, line); }

unsigned lane_id() { return thread_index() % 32; }
uint64_t* warp_slot() { return &g_run.current->slot[g_run.current->slot_turn]; }
uint64_t* warp_slot_of_lane(unsigned lane) {
  unsigned i = thread_index() - lane_id() + lane;
  return i < g_run.count ? &g_run.threads[i].slot[g_run.current->slot_turn] : warp_slot();
}
void next_warp_slot() { g_run.current->slot_turn ^= 1; }

unsigned live_lane_mask() {
  unsigned base = thread_index() - lane_id(), mask = 0;
  for (unsigned l = 0; l < 32 && base + l < g_run.count; l++)
    if (g_run.threads[base + l].state != State::Done) mask |= 1u << l;
  return mask;
}

unsigned ballot(bool pred, const char* file, int line) {
  *warp_slot() = pred ? 1 : 0;
  sync_warp(file, line);
  unsigned base = thread_index() - lane_id(), mask = 0;
  for (unsigned l = 0; l < 32 && base + l < g_run.count; l++) {
    const SimThread& t = g_run.threads[base + l];
    if (t.state != State::Done && t.slot[g_run.current->slot_turn]) mask |= 1u << l;
  }
  sync_warp(file, line);
  return mask;
}

unsigned char* warp_wide_slot() { return g_run.current->wide; }
const unsigned char* warp_wide_slot_of_lane(unsigned lane) {
  unsigned i = thread_index() - lane_id() + lane;
  return i < g_run.count ? g_run.threads[i].wide : warp_wide_slot();
}

void warp_collective(const char* what, const char* file, int line) {
  sync_warp(file, line);
  // Released: every live lane of the warp waits at a warp exchange. All 32 lanes must
  // be live and at this one (a lane past it waits at its exit, the same file:line).
  // Each lane checks the next one (lane 31 lane 0): a lane here whose successor is
  // not reports it, so when none reports, the whole warp is here.
  const unsigned base = thread_index() - lane_id(), l = (lane_id() + 1) % 32;
  char msg[1024];
  if (base + l >= g_run.count || g_run.threads[base + l].state == State::Done) {
    std::snprintf(msg, sizeof msg, "%s at %s:%d needs all 32 lanes of the warp: lane %u of warp %u is %s", what, file, line, l, base / 32,
                  base + l >= g_run.count ? "not in the block" : "finished");
    fail(msg);
  }
  const SimThread& t = g_run.threads[base + l];
  if (t.line != line || (t.file != file && std::strcmp(t.file, file) != 0)) {
    std::snprintf(msg, sizeof msg, "divergent %s: lane %u of warp %u is at %s:%d, lane %u at %s:%d", what, lane_id(), base / 32, file, line, l, t.file, t.line);
    fail(msg);
  }
}

// Reached only from check_access: the address is misaligned, or else not in shared memory.
void access_fault(const char* what, const void* p, size_t align, bool, const char* file, int line) {
  char msg[1024];
  if (reinterpret_cast<uintptr_t>(p) % align != 0)
    std::snprintf(msg, sizeof msg, "%s at %s:%d: address %p is not %zu-byte aligned (thread %u)", what, file, line, p, align, thread_index());
  else
    std::snprintf(msg, sizeof msg, "%s at %s:%d: address %p is not in the block's shared memory (thread %u)", what, file, line, p, thread_index());
  fail(msg);
}

void cp_async(void* dst, const void* src, unsigned src_bytes, const char* file, int line) {
  check_access("cp.async destination", dst, 16, true, file, line);
  check_access("cp.async source", src, 16, false, file, line);
  if (src_bytes > 16) fail("cp.async: src-size above the copy size (16)");
  AsyncCopy c{static_cast<unsigned char*>(dst), {}};
  std::memcpy(c.data, src, src_bytes);
  // Until the wait that retires it, the destination holds nothing a thread may read.
  std::memset(dst, 0xFF, 16);
  *landed_entry(c.dst) = 0;
  g_run.current->open_copies.push_back(c);
}

void cp_async_commit() { commit_group(g_run.current->open_copies, g_run.current->groups); }

void cp_async_wait(unsigned pending) {
  SimThread* t = g_run.current;
  retire_groups(t->groups, pending, [t](const AsyncCopy& c) {
    std::memcpy(c.dst, c.data, 16);
    uint32_t* owner = landed_entry(c.dst);
    *owner = thread_index() + 1;
    g_run.landed.push_back(static_cast<size_t>(owner - g_run.landed_owner.data()));
    g_any_landed = true;
    t->unfenced = true;
  });
}

void check_landed_owner(const char* what, const void* p, const char* file, int line) {
  const uint32_t* owner = landed_entry(p);
  if (!owner || *owner == 0 || *owner - 1 == thread_index()) return;
  char msg[1024];
  std::snprintf(msg, sizeof msg,
                "%s at %s:%d: thread %u reads shared bytes at %p that thread %u's cp.async landed at its cp.async.wait_group, with no __syncthreads since "
                "(the wait makes them visible to that thread only)",
                what, file, line, thread_index(), p, *owner - 1);
  fail(msg);
}

void warpgroup_barrier(const char* file, int line) { yield_as(State::AtGroupBarrier, file, line); }

void warpgroup_collective(const char* what, size_t uniform_bytes, const char* file, int line) {
  warpgroup_barrier(file, line);
  const unsigned me = thread_index(), base = me - me % 128;
  char msg[1024];
  // Each thread checks the next one of its warpgroup (the last the first): together all 128.
  const unsigned i = base + (me - base + 1) % 128;
  if (i >= g_run.count || g_run.threads[i].state == State::Done) {
    std::snprintf(msg, sizeof msg, "%s at %s:%d needs all 128 threads of the warpgroup: thread %u of warpgroup %u is %s", what, file, line, i, base / 128,
                  i >= g_run.count ? "not in the block" : "finished");
    fail(msg);
  }
  const SimThread& t = g_run.threads[i];
  if (t.line != line || (t.file != file && std::strcmp(t.file, file) != 0)) {
    std::snprintf(msg, sizeof msg, "divergent %s: thread %u of warpgroup %u is at %s:%d, thread %u at %s:%d", what, me, base / 128, file, line, i, t.file, t.line);
    fail(msg);
  }
  if (std::memcmp(t.wide, g_run.current->wide, uniform_bytes) != 0) {
    std::snprintf(msg, sizeof msg, "%s at %s:%d: threads %u and %u of warpgroup %u give different operands that must be the same across the warpgroup", what, file,
                  line, me, i, base / 128);
    fail(msg);
  }
}

void wgmma_issue(const WgmmaOp& op) {
  for (unsigned i = 0; i < g_run.count; i++) {
    if (!g_run.threads[i].unfenced) continue;
    char msg[1024];
    std::snprintf(msg, sizeof msg,
                  "wgmma at %s:%d: thread %u's cp.async bytes landed with no fence.proxy.async since (shared memory written by the generic proxy is not "
                  "ordered before wgmma's reads without it)",
                  op.file, op.line, i);
    fail(msg);
  }
  g_run.current->open_wgmma.push_back(op);
}

void wgmma_commit() { commit_group(g_run.current->open_wgmma, g_run.current->wgmma_groups); }

void wgmma_wait(unsigned pending) { retire_groups(g_run.current->wgmma_groups, pending, [](const WgmmaOp& op) { op.run(op); }); }

void fence_proxy_async() { g_run.current->unfenced = false; }

}  // namespace kiln_sim
