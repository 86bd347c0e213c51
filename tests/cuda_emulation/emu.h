// CUDA's execution model on host threads, enough to run memctl's kernels
// (src/kernels/cuda/**/*.cu) on a machine without a GPU: tests/integration/cuda_emulation.rs
// compiles the kernel files (each in a namespace of its own) with this header and runner.cpp,
// under AddressSanitizer and under ThreadSanitizer, and compares what the kernels write with
// memctl's CPU ops.
//
// A launch runs every thread of a block as its own host thread, so that `__syncthreads` and
// the warp shuffles are real rendezvous: a barrier that some threads never reach is reported as
// a deadlock, threads waiting at different barriers are reported, a shuffle that reads a lane
// which has returned is reported, and a missing barrier is a data race for ThreadSanitizer.
// Blocks run one after another, so a `__shared__` variable is a function-local static, and
// dynamic shared memory one buffer of exactly the launch's bytes (AddressSanitizer sees a
// kernel use more), refilled with NaN bytes at each block (a read before a write shows). Not
// emulated: warp-synchronous code without a `_sync` intrinsic, atomics, textures, cooperative
// groups (memctl's kernels use none).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
// Blocks run one at a time: a static is the running block's shared memory.
#define __shared__ static

using std::isinf;
using std::isnan;
using std::max;
using std::min;

// CUDA's math intrinsics that the C library lacks.
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __int_as_float(int bits) {
    float out;
    std::memcpy(&out, &bits, sizeof out);
    return out;
}
inline int __float_as_int(float x) {
    int out;
    std::memcpy(&out, &x, sizeof out);
    return out;
}

namespace emu {

[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "cuda emulation: %s (block %u, thread %u)\n", what, blockIdx.x, threadIdx.x);
    std::fflush(stderr);
    std::_Exit(3);
}

// A barrier over the threads that have not returned from the kernel: a thread that returns
// leaves it, as an exited thread does on the GPU.
class Rendezvous {
  public:
    explicit Rendezvous(unsigned members) : live_(members) {}

    // `site` names the barrier (its source line): every thread of a rendezvous must wait at the
    // same one, as on the GPU, where threads at different barriers are an error (0: any).
    void arrive_and_wait(long site = 0) {
        std::unique_lock<std::mutex> lock(mutex_);
        const unsigned long generation = generation_;
        if (arrived_ == 0) {
            site_ = site;
        } else if (site != site_) {
            char what[160];
            std::snprintf(what, sizeof what, "threads of a block wait at different barriers (lines %ld and %ld)", site_,
                          site);
            fail(what);
        }
        if (++arrived_ == live_) {
            release();
            return;
        }
        if (!released_.wait_for(lock, std::chrono::seconds(20), [&] { return generation_ != generation; })) {
            fail("a barrier that the block's other threads never reached (deadlock)");
        }
    }

    void leave() {
        std::lock_guard<std::mutex> lock(mutex_);
        --live_;
        if (live_ > 0 && arrived_ == live_) release();
    }

    void reset(unsigned members) {
        std::lock_guard<std::mutex> lock(mutex_);
        live_ = members;
        arrived_ = 0;
    }

  private:
    void release() {
        arrived_ = 0;
        ++generation_;
        released_.notify_all();
    }

    std::mutex mutex_;
    std::condition_variable released_;
    unsigned live_;
    unsigned arrived_ = 0;
    unsigned long generation_ = 0;
    long site_ = 0;
};

// One warp's shuffle exchange: each lane posts its value, all meet, each reads its source,
// all meet again before the slots are reused.
struct Warp {
    explicit Warp(unsigned lanes) : rendezvous(lanes), lanes(lanes) {}
    Rendezvous rendezvous;
    unsigned lanes;
    double slots[32] = {};
    bool returned[32] = {};
};

struct Block {
    Block(unsigned threads) : rendezvous(threads) {
        for (unsigned first = 0; first < threads; first += 32)
            warps.push_back(std::make_unique<Warp>(std::min(32u, threads - first)));
    }
    Rendezvous rendezvous;
    std::vector<std::unique_ptr<Warp>> warps;
    std::vector<unsigned char> dynamic_shared;
};

inline thread_local Block* block = nullptr;

inline unsigned linear_thread() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

// Every lane of a full warp offers `value` and receives the value of the lane `source(lane)`.
template <class T, class Source>
T shuffle(unsigned mask, T value, Source source_of) {
    if (mask != 0xffffffffu) fail("a shuffle with a partial mask (not emulated)");
    const unsigned me = linear_thread();
    Warp& warp = *block->warps[me / 32];
    const unsigned lane = me % 32, source = source_of(lane) & 31u;
    if (warp.lanes != 32) fail("a full-mask shuffle in a warp of fewer than 32 threads");
    static_assert(sizeof(T) <= sizeof(double), "shuffled values fit a slot");
    std::memcpy(&warp.slots[lane], &value, sizeof(T));
    warp.rendezvous.arrive_and_wait();
    if (warp.returned[source]) fail("a full-mask shuffle reads a lane that has returned");
    T out;
    std::memcpy(&out, &warp.slots[source], sizeof(T));
    warp.rendezvous.arrive_and_wait();
    return out;
}

template <class T>
T* dynamic_shared() {
    return reinterpret_cast<T*>(block->dynamic_shared.data());
}

// Runs `kernel` (a callable taking no arguments: the launch's arguments bound) on a grid of
// `grid` blocks of `threads` threads with `shared_bytes` of dynamic shared memory.
template <class Kernel>
void launch(Kernel kernel, dim3 grid, dim3 threads, unsigned shared_bytes) {
    const unsigned per_block = threads.x * threads.y * threads.z;
    if (per_block == 0 || per_block > 1024) fail("a block of 0 or more than 1024 threads");
    if (shared_bytes > 48 * 1024) fail("more than 48 KiB of dynamic shared memory without an opt-in");
    Block state(per_block);
    // Exactly what the launch asked for: AddressSanitizer sees a kernel use more.
    state.dynamic_shared.resize(shared_bytes);
    // Two rendezvous between blocks, not one: a thread that wakes late from the start of a block
    // must not acquire what the others released at its end (a happens-before edge that the GPU
    // does not have, which would hide a missing barrier from ThreadSanitizer).
    Rendezvous block_start(per_block), block_end(per_block);
    std::vector<std::thread> workers;
    workers.reserve(per_block);
    for (unsigned t = 0; t < per_block; ++t) {
        workers.emplace_back([&, t] {
            threadIdx = {t % threads.x, (t / threads.x) % threads.y, t / (threads.x * threads.y)};
            blockDim = threads;
            gridDim = grid;
            block = &state;
            for (unsigned z = 0; z < grid.z; ++z)
                for (unsigned y = 0; y < grid.y; ++y)
                    for (unsigned x = 0; x < grid.x; ++x) {
                        blockIdx = {x, y, z};
                        if (t == 0) {
                            // Shared memory holds what the last block left; NaN bytes make a read
                            // before a write show up.
                            std::fill(state.dynamic_shared.begin(), state.dynamic_shared.end(), 0xff);
                            state.rendezvous.reset(per_block);
                            for (auto& w : state.warps) {
                                w->rendezvous.reset(w->lanes);
                                std::fill(std::begin(w->returned), std::end(w->returned), false);
                            }
                        }
                        block_start.arrive_and_wait();
                        kernel();
                        // A lane that returns leaves its warp and its block; the other lanes'
                        // rendezvous wait for that, so they see the mark.
                        Warp& warp = *state.warps[t / 32];
                        warp.returned[t % 32] = true;
                        warp.rendezvous.leave();
                        state.rendezvous.leave();
                        block_end.arrive_and_wait();
                    }
        });
    }
    for (std::thread& w : workers) w.join();
}

}  // namespace emu

// A macro, so that each barrier is known by its line.
#define __syncthreads() emu::block->rendezvous.arrive_and_wait(__LINE__)

template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask) {
    return emu::shuffle(mask, value, [=](unsigned lane) { return lane ^ static_cast<unsigned>(lane_mask); });
}

// The default width, 32: the source lane modulo 32.
template <class T>
T __shfl_sync(unsigned mask, T value, int source_lane) {
    return emu::shuffle(mask, value, [=](unsigned) { return static_cast<unsigned>(source_lane); });
}
