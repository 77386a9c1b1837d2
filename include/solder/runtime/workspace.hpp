// The host workspace of reduce_overhead: a call's tensors planned once, then served from one
// block, so that the steady state of a planned call allocates nothing.
//
// The first call of a signature is recorded: every tensor the call allocates, its size, and when
// it is freed. Those freed within the call are its intermediates; they get offsets in one block,
// planned from their lifetimes (a buffer is reused as soon as it is dead, as Inductor's memory
// planning does: the largest first, each at the lowest offset free for its whole life). Those
// still alive when the call returns are its outputs. Later calls replay the plan: the k-th
// allocation is served from the block; an output reuses the previous call's buffer when nothing
// else holds it any more (else it gets a new one, so that a tensor the caller kept is never
// overwritten). The shared_ptr control blocks come from a pool too.
//
// A call that allocates differently from its recording (a size or a count that differs)
// finishes on the heap and the next call records again.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "../core/tensor.hpp"

namespace solder::runtime {

class Workspace : solder::detail::HostStorage {
 public:
  // Installs the workspace as this thread's host storage for one call.
  class Call {
   public:
    explicit Call(Workspace& w) : w_(w), saved_(solder::detail::host_storage()) {
      w_.begin();
      solder::detail::host_storage() = &w_;
    }
    ~Call() {
      solder::detail::host_storage() = saved_;
      w_.end();
    }
    Call(Call const&) = delete;
    Call& operator=(Call const&) = delete;

   private:
    Workspace& w_;
    solder::detail::HostStorage* saved_;
  };

  // Bytes of the block the intermediates share (0 before a plan exists).
  std::size_t bytes() const { return block_ ? block_bytes_ : 0; }
  // Bytes the intermediates would take each in a buffer of its own.
  std::size_t unplanned_bytes() const {
    std::size_t n = 0;
    for (auto const& a : plan_)
      if (!a.output) n += a.bytes;
    return n;
  }
  bool planned() const { return planned_; }
  std::size_t calls_recorded() const { return recordings_; }

 private:
  static constexpr std::size_t align = 64;

  struct Allocation {
    std::size_t bytes;
    std::int64_t born, died;  // event times; died = -1: alive when the call returned (an output)
    bool output = false;
    std::size_t offset = 0;
  };

  // Fixed-size slots for the shared_ptr control blocks of served buffers.
  struct Slots {
    static constexpr std::size_t size = 128;
    std::vector<std::unique_ptr<std::byte[]>> chunks;
    std::vector<void*> free;
    void reserve(std::size_t n) {  // when a plan is made, so that a replay never grows the pool
      while (free.size() < n) {
        chunks.push_back(std::make_unique<std::byte[]>(size * 64));
        for (std::size_t i = 0; i < 64; ++i) free.push_back(chunks.back().get() + i * size);
      }
    }
    void* take() {
      reserve(1);
      void* p = free.back();
      free.pop_back();
      return p;
    }
  };
  template <class T>
  struct SlotAllocator {
    using value_type = T;
    std::shared_ptr<Slots> slots;
    SlotAllocator(std::shared_ptr<Slots> s) : slots(std::move(s)) {}
    template <class U>
    SlotAllocator(SlotAllocator<U> const& o) : slots(o.slots) {}
    T* allocate(std::size_t n) {
      static_assert(sizeof(T) <= Slots::size && alignof(T) <= alignof(std::max_align_t));
      if (n != 1) return static_cast<T*>(::operator new(n * sizeof(T)));
      return static_cast<T*>(slots->take());
    }
    void deallocate(T* p, std::size_t n) {
      if (n != 1) return ::operator delete(p);
      slots->free.push_back(p);
    }
    template <class U>
    bool operator==(SlotAllocator<U> const& o) const { return slots == o.slots; }
  };

  struct Block {
    std::byte* data;
    explicit Block(std::size_t bytes) : data(static_cast<std::byte*>(::operator new(bytes, std::align_val_t{align}))) {}
    ~Block() { ::operator delete(data, std::align_val_t{align}); }
  };

  static std::size_t rounded(std::size_t bytes) { return (bytes + align - 1) / align * align; }

  void begin() {
    next_ = 0;
    diverged_ = false;
    if (!planned_) {
      plan_.clear();
      recording_ = std::make_shared<Recording>();
    }
  }

  std::shared_ptr<void> allocate(std::size_t bytes) override {
    std::size_t const k = next_++;
    if (!planned_) return record(bytes, recording_->clock++);
    if (diverged_ || k >= plan_.size() || plan_[k].bytes != bytes) {
      diverged_ = true;
      return heap(bytes);
    }
    return plan_[k].output ? output(k) : intermediate(k);
  }

  // Recording: heap buffers whose deleters note when they die (in the recording's own state,
  // which a buffer that outlives the workspace keeps alive).
  std::shared_ptr<void> record(std::size_t bytes, std::int64_t now) {
    plan_.push_back({bytes, now, -1});
    recording_->died.push_back(-1);
    void* p = ::operator new(bytes, std::align_val_t{align});
    return std::shared_ptr<void>(p, [log = recording_, k = plan_.size() - 1](void* q) {
      if (log->open) log->died[k] = log->clock++;
      ::operator delete(q, std::align_val_t{align});
    });
  }
  static std::shared_ptr<void> heap(std::size_t bytes) {
    void* p = ::operator new(bytes, std::align_val_t{align});
    return std::shared_ptr<void>(p, [](void* q) { ::operator delete(q, std::align_val_t{align}); });
  }
  std::shared_ptr<void> intermediate(std::size_t k) {
    ++*live_;
    // The deleter keeps the block alive: a buffer that outlives its call (which the recording
    // says does not happen) still points at memory.
    return std::shared_ptr<void>(block_->data + plan_[k].offset, [live = live_, block = block_](void*) { --*live; },
                                 SlotAllocator<char>(slots_));
  }
  std::shared_ptr<void> output(std::size_t k) {
    auto& kept = outputs_[k];
    if (!kept || kept.use_count() > 1) kept = heap(plan_[k].bytes);  // the caller holds the last one
    return kept;
  }

  void end() {
    if (!planned_) {
      recording_->open = false;
      for (std::size_t k = 0; k < plan_.size(); ++k) plan_[k].died = recording_->died[k];
      ++recordings_;
      make_plan();
    } else if (diverged_ || next_ != plan_.size() || *live_ != 0) {
      planned_ = false;  // record again on the next call
      if (*live_ != 0) {  // an intermediate escaped: its memory is never handed out again
        block_.reset();
        live_ = std::make_shared<std::int64_t>(0);
      }
    }
  }

  // Offsets from lifetimes: the largest first, each at the lowest offset that no buffer alive
  // at the same time occupies.
  void make_plan() {
    std::vector<std::size_t> order;
    for (std::size_t k = 0; k < plan_.size(); ++k) {
      plan_[k].output = plan_[k].died < 0;
      if (!plan_[k].output) order.push_back(k);
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return plan_[a].bytes > plan_[b].bytes; });
    std::vector<std::size_t> placed;
    block_bytes_ = 0;
    for (std::size_t k : order) {
      Allocation& a = plan_[k];
      std::vector<std::pair<std::size_t, std::size_t>> busy;  // [begin, end) of buffers alive with a
      for (std::size_t j : placed) {
        Allocation const& b = plan_[j];
        if (a.born < b.died && b.born < a.died) busy.emplace_back(b.offset, b.offset + rounded(b.bytes));
      }
      std::sort(busy.begin(), busy.end());
      std::size_t offset = 0;
      for (auto const& [lo, hi] : busy) {
        if (offset + rounded(a.bytes) <= lo) break;
        offset = std::max(offset, hi);
      }
      a.offset = offset;
      block_bytes_ = std::max(block_bytes_, offset + rounded(a.bytes));
      placed.push_back(k);
    }
    block_ = std::make_shared<Block>(std::max<std::size_t>(block_bytes_, align));
    slots_->reserve(order.size());
    outputs_.assign(plan_.size(), nullptr);
    for (std::size_t k = 0; k < plan_.size(); ++k)
      if (plan_[k].output) outputs_[k] = heap(plan_[k].bytes);
    planned_ = true;
  }

  struct Recording {
    std::int64_t clock = 0;
    std::vector<std::int64_t> died;
    bool open = true;
  };

  std::vector<Allocation> plan_;
  std::shared_ptr<Recording> recording_;
  std::shared_ptr<std::int64_t> live_ = std::make_shared<std::int64_t>(0);
  std::vector<std::shared_ptr<void>> outputs_;
  std::shared_ptr<Block> block_;
  std::shared_ptr<Slots> slots_ = std::make_shared<Slots>();
  std::size_t block_bytes_ = 0, next_ = 0, recordings_ = 0;
  bool planned_ = false, diverged_ = false;
};

}  // namespace solder::runtime
