// Ring reduce-scatter of f32 sums on a Gloo context's unbound buffers, for
// the `gloo` sync backend (Gloo's own ReduceScatterHalvingDoubling is an
// old-style algorithm without per-call tags or timeouts).
//
// Layout: data holds W = size chunks of n floats; chunk c ends up, on rank c,
// as the sum over the ranks of their chunk c. The ring sends to rank + 1 and
// receives from rank - 1. At step s (0 .. W-2) rank r sends its partial sum of
// chunk (r - s - 1) and receives the partial sum of chunk (r - s - 2), adding
// its own values: chunk c is added up along the ring starting after c,
// ((x[c+1] + x[c+2]) + ...) + x[c], the same order on every run. A chunk is
// never written after it has been sent, so sends need no copy.
//
// Each step moves its chunk in segments of at most kSegmentBytes: unit u =
// step * segments + segment. Unit u is received into one of two scratch
// segments while unit u - 1 is reduced. Its send needs unit u - segments
// reduced (the same segment, a step before): with two segments or more that
// is done already and the send goes out first; with one, after the reduction.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln {

// Slot prefix of this collective; Gloo's own prefixes are 0x01 .. 0x08 (its types.h).
constexpr uint8_t kRingReduceScatterSlotPrefix = 0x40;
constexpr size_t kSegmentBytes = 1 << 20;

inline void ringReduceScatterSum(const std::shared_ptr<gloo::Context>& context, float* data, size_t n, uint32_t tag,
                                 std::chrono::milliseconds timeout) {
  const int size = context->size, rank = context->rank;
  if (size == 1 || n == 0) return;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto left = [&] {
    auto now = std::chrono::steady_clock::now();
    return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
  };
  const int right = (rank + 1) % size, from = (rank + size - 1) % size;
  const uint64_t slot = gloo::Slot::build(kRingReduceScatterSlotPrefix, tag);

  const size_t perSegment = kSegmentBytes / sizeof(float);
  const size_t segments = (n + perSegment - 1) / perSegment;
  const size_t units = static_cast<size_t>(size - 1) * segments;
  const size_t scratchFloats = std::min(n, perSegment);
  std::vector<float> scratch(2 * scratchFloats);
  auto out = context->createUnboundBuffer(data, static_cast<size_t>(size) * n * sizeof(float));
  auto tmp = context->createUnboundBuffer(scratch.data(), scratch.size() * sizeof(float));

  struct Unit {
    size_t sendAt, recvAt, count;  // float offsets into data, and the segment's length
  };
  const auto unit = [&](size_t u) {
    const size_t step = u / segments, segment = u % segments;
    const size_t sendChunk = (rank + 2 * size - step - 1) % size, recvChunk = (rank + 2 * size - step - 2) % size;
    const size_t at = segment * perSegment;
    return Unit{sendChunk * n + at, recvChunk * n + at, std::min(perSegment, n - at)};
  };
  const auto check = [&](bool completed, const char* what) {
    if (!completed) throw std::runtime_error(std::string("reduce-scatter ") + what + " was aborted");
  };

  const auto send = [&](size_t u) {
    const Unit cur = unit(u);
    out->send(right, slot, cur.sendAt * sizeof(float), cur.count * sizeof(float));
  };
  for (size_t u = 0; u <= units; u++) {
    const bool more = u < units, early = more && (u < segments || segments >= 2);
    if (more) tmp->recv(from, slot, (u & 1) * scratchFloats * sizeof(float), unit(u).count * sizeof(float));
    if (early) send(u);
    if (u >= 1) {
      const Unit prev = unit(u - 1);
      check(tmp->waitRecv(left()), "receive");
      const float* in = scratch.data() + ((u - 1) & 1) * scratchFloats;
      float* acc = data + prev.recvAt;
      for (size_t i = 0; i < prev.count; i++) acc[i] = in[i] + acc[i];
    }
    if (more && !early) send(u);
    if (u >= 1) check(out->waitSend(left()), "send");
  }
}

}  // namespace kiln
