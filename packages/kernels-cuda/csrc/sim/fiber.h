// fiber.h: minimal stackful coroutines for the simulator: one per simulated GPU
// thread, switched by a few instructions on x86-64 (callee-saved registers and the
// stack pointer), by ucontext elsewhere. Stacks come from a pool with a guard page.
#pragma once
#include <cstddef>

namespace kiln_sim {

struct Fiber {
  void* sp = nullptr;          // saved stack pointer while suspended (x86-64 path)
  void* context = nullptr;     // ucontext_t* on other architectures
  char* stack = nullptr;       // lowest usable address
  size_t stack_size = 0;
};

using FiberEntry = void (*)();

/** Prepares `f` (with a pooled stack) to start in `entry` at its first resume. */
void fiber_init(Fiber& f, FiberEntry entry);
/** Suspends the running code into `from` and resumes `to`. */
void fiber_switch(Fiber& from, Fiber& to);
/** Called first thing inside a fiber's entry (sanitizer bookkeeping). */
void fiber_started();
/** Gives every pooled stack back to the system. */
void fiber_release_stacks();

}  // namespace kiln_sim
