// fiber.cc: see fiber.h. Under AddressSanitizer every switch is announced so that
// ASan tracks which stack is live.
#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_SIM_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define KILN_SIM_ASAN 1
#endif

#if KILN_SIM_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace kiln_sim {
namespace {

// Enough for kernels with register arrays (attention keeps a head_dim row per thread);
// ASan frames are larger.
#if KILN_SIM_ASAN
constexpr size_t kStackSize = 512 * 1024;
#else
constexpr size_t kStackSize = 256 * 1024;
#endif

std::vector<char*> g_all_stacks;
size_t g_page = 0;

char* take_stack() {
  if (!g_page) g_page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, kStackSize + g_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) {
    std::fprintf(stderr, "cuda-sim: cannot map a %zu-byte fiber stack\n", kStackSize);
    std::abort();
  }
  mprotect(mem, g_page, PROT_NONE);  // guard page: a stack overflow faults instead of corrupting
  char* s = static_cast<char*>(mem) + g_page;
  g_all_stacks.push_back(s);
  return s;
}

#if KILN_SIM_ASAN
const void* g_scheduler_stack_bottom = nullptr;
size_t g_scheduler_stack_size = 0;
#endif

}  // namespace

#if defined(__x86_64__)
extern "C" void kiln_sim_switch_stack(void** save_sp, void* load_sp);
// System V: rbx, rbp, r12-r15 are callee-saved; everything else the caller saves.
asm(R"(
.text
.globl kiln_sim_switch_stack
.type kiln_sim_switch_stack,@function
kiln_sim_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size kiln_sim_switch_stack,.-kiln_sim_switch_stack
)");
#endif

void fiber_init(Fiber& f, FiberEntry entry) {
  if (!f.stack) {
    f.stack = take_stack();
    f.stack_size = kStackSize;
  }
#if KILN_SIM_ASAN
  __asan_unpoison_memory_region(f.stack, f.stack_size);
#endif
#if defined(__x86_64__)
  // Top of stack, 16-byte aligned: [top-8] fake return address, [top-16] entry
  // (popped by `ret`, leaving rsp = 8 mod 16 as at any function entry), then six
  // zeroed callee-saved registers.
  auto* top = reinterpret_cast<uintptr_t*>((reinterpret_cast<uintptr_t>(f.stack + f.stack_size)) & ~uintptr_t{15});
  top[-1] = 0;
  top[-2] = reinterpret_cast<uintptr_t>(entry);
  for (int i = 3; i <= 8; i++) top[-i] = 0;
  f.sp = top - 8;
#else
  auto* ctx = static_cast<ucontext_t*>(f.context);
  if (!ctx) f.context = ctx = new ucontext_t();
  getcontext(ctx);
  ctx->uc_stack.ss_sp = f.stack;
  ctx->uc_stack.ss_size = f.stack_size;
  ctx->uc_link = nullptr;
  makecontext(ctx, entry, 0);
#endif
}

void fiber_switch(Fiber& from, Fiber& to) {
#if KILN_SIM_ASAN
  // The scheduler's own stack is not pooled: its bounds are learnt on the first switch into a fiber.
  const void* bottom = to.stack ? to.stack : g_scheduler_stack_bottom;
  size_t size = to.stack ? to.stack_size : g_scheduler_stack_size;
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, bottom, size);
#endif
#if defined(__x86_64__)
  kiln_sim_switch_stack(&from.sp, to.sp);
#else
  if (!from.context) from.context = new ucontext_t();
  swapcontext(static_cast<ucontext_t*>(from.context), static_cast<ucontext_t*>(to.context));
#endif
#if KILN_SIM_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

void fiber_started() {
#if KILN_SIM_ASAN
  const void* old_bottom = nullptr;
  size_t old_size = 0;
  __sanitizer_finish_switch_fiber(nullptr, &old_bottom, &old_size);
  if (!g_scheduler_stack_bottom) {
    g_scheduler_stack_bottom = old_bottom;
    g_scheduler_stack_size = old_size;
  }
#endif
}

void fiber_release_stacks() {
  for (char* s : g_all_stacks) munmap(s - g_page, kStackSize + g_page);
  g_all_stacks.clear();
}

}  // namespace kiln_sim
