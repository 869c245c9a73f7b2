// CPU threads for GPU threads: enough of CUDA's device API to run a family file's kernel on a machine
// without a GPU.  Every GPU thread is an OS thread; __syncthreads and __syncwarp are real barriers,
// shuffles exchange through a warp's slots between two barriers, atomics are the host's, and a
// launch runs all its blocks at once, so kernels whose blocks wait for each other run as they would
// on a GPU where they are all resident.  For tests of a kernel's logic (indices, barriers, the
// protocol between blocks, the arithmetic); its timing means nothing.  Compile the device source
// after this header with -DQR_HOST_EMULATION, g++ -std=c++20 -pthread.
//
// Kernels with static __shared__ arrays run with -DQR_EMULATE_STATIC_SHARED, which makes those arrays
// static (one copy in the process), through launch_serial: one block at a time, so the copy is the
// block's.  Only kernels whose blocks never wait for each other can run that way.
#pragma once

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#ifdef QR_EMULATE_STATIC_SHARED
#define __shared__ static
#else
#define __shared__
#endif
#define __launch_bounds__(...)

using std::fabs;
using std::fma;
using std::isfinite;
using std::max;
using std::min;
using std::sqrt;

struct uint3 {
    unsigned x = 0, y = 0, z = 0;
};

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

struct alignas(16) float4 {
    float x, y, z, w;
};

inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

namespace emu {

struct Warp {
    std::barrier<> bar{32};
    std::uint64_t slot[32] = {};
};

struct Block {
    Block(unsigned threads, std::size_t shared_bytes)
        : bar(threads), warps(new Warp[(threads + 31) / 32]), shared(shared_bytes / sizeof(double) + 1, 0.0) {}
    std::barrier<> bar;
    std::unique_ptr<Warp[]> warps;
    std::vector<double> shared;  // the launch's dynamic shared memory, float64-aligned
    std::atomic<int> any{0};
    std::mutex named_mutex;
    std::map<int, std::unique_ptr<std::barrier<>>> named;  // bar.sync id, count: made on first use

    std::barrier<>& named_barrier(int id, int threads) {
        const std::lock_guard<std::mutex> lock(named_mutex);
        auto& b = named[id];
        if (!b) b = std::make_unique<std::barrier<>>(threads);
        return *b;
    }
};

inline thread_local Block* block = nullptr;

}  // namespace emu

inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 gridDim;
inline dim3 blockDim;

inline void __syncthreads() { emu::block->bar.arrive_and_wait(); }

// bar.sync id, threads: the first `threads` threads to arrive at barrier id (a range of warps) meet.
inline void named_barrier(int id, int threads) { emu::block->named_barrier(id, threads).arrive_and_wait(); }

inline emu::Warp& this_warp() { return emu::block->warps[threadIdx.x / 32]; }

inline void __syncwarp(unsigned = 0xffffffffu) { this_warp().bar.arrive_and_wait(); }

template <class T>
T exchange(T value, unsigned source) {
    static_assert(sizeof(T) <= sizeof(std::uint64_t));
    emu::Warp& warp = this_warp();
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    warp.slot[threadIdx.x % 32] = bits;
    warp.bar.arrive_and_wait();
    bits = warp.slot[source % 32];
    warp.bar.arrive_and_wait();  // every lane has read before the slots are written again
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
}

template <class T>
T __shfl_sync(unsigned, T value, int source) { return exchange(value, (unsigned)source); }

template <class T>
T __shfl_xor_sync(unsigned, T value, int mask) { return exchange(value, (threadIdx.x % 32) ^ (unsigned)mask); }

inline bool __any_sync(unsigned, bool predicate) {
    emu::Warp& warp = this_warp();
    warp.slot[threadIdx.x % 32] = predicate;
    warp.bar.arrive_and_wait();
    bool any = false;
    for (std::uint64_t s : warp.slot) any = any || s;
    warp.bar.arrive_and_wait();
    return any;
}

inline int __syncthreads_or(int predicate) {
    emu::Block& b = *emu::block;
    if (predicate) b.any.store(1);
    b.bar.arrive_and_wait();
    const int any = b.any.load();
    b.bar.arrive_and_wait();
    if (threadIdx.x == 0) b.any.store(0);
    b.bar.arrive_and_wait();
    return any;
}

inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }

inline int atomicMax(int* p, int v) {
    int seen = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (seen < v && !__atomic_compare_exchange_n(p, &seen, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return seen;
}

template <class F, class U>
F atomic_float_add(F* p, F v) {
    U seen = __atomic_load_n(reinterpret_cast<U*>(p), __ATOMIC_SEQ_CST);
    for (;;) {
        F old, sum;
        std::memcpy(&old, &seen, sizeof(F));
        sum = old + v;
        U want;
        std::memcpy(&want, &sum, sizeof(F));
        if (__atomic_compare_exchange_n(reinterpret_cast<U*>(p), &seen, want, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
            return old;
    }
}

inline float atomicAdd(float* p, float v) { return atomic_float_add<float, std::uint32_t>(p, v); }
inline double atomicAdd(double* p, double v) { return atomic_float_add<double, std::uint64_t>(p, v); }

// sm_90's vector atomic: each of the four elements is added atomically, not the four as one.
inline float4 atomicAdd(float4* p, float4 v) {
    return float4{atomicAdd(&p->x, v.x), atomicAdd(&p->y, v.y), atomicAdd(&p->z, v.z), atomicAdd(&p->w, v.w)};
}

inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __nanosleep(unsigned) { std::this_thread::yield(); }
[[noreturn]] inline void __trap() { std::abort(); }

template <class T>
T __ldg(const T* p) {
    return *p;
}

template <class T>
T __ldcg(const T* p) {
    T v;
    __atomic_load(p, &v, __ATOMIC_SEQ_CST);
    return v;
}

inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline double __drcp_rn(double x) { return 1.0 / x; }

// The device source's hardware hooks (see its QR_HOST_EMULATION guard).
inline int load_acquire(const int* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline double* dynamic_shared() { return emu::block->shared.data(); }

namespace emu {

// Runs body() as grid blocks of `threads` GPU threads, all at once, with shared_bytes of dynamic
// shared memory a block; returns when every thread has.
template <class Body>
void launch(unsigned grid, unsigned threads, std::size_t shared_bytes, Body body) {
    if (threads % 32) throw std::invalid_argument("emu::launch: threads must be whole warps");
    blockDim = dim3{threads, 1, 1};
    std::vector<std::unique_ptr<Block>> blocks;
    for (unsigned b = 0; b < grid; ++b) blocks.push_back(std::make_unique<Block>(threads, shared_bytes));
    struct Start {
        Block* block;
        unsigned grid, b, t;
        Body* body;
    };
    std::vector<Start> starts;
    for (unsigned b = 0; b < grid; ++b)
        for (unsigned t = 0; t < threads; ++t) starts.push_back({blocks[b].get(), grid, b, t, &body});
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 19);
    std::vector<pthread_t> ids(starts.size());
    for (std::size_t i = 0; i < starts.size(); ++i) {
        auto run = [](void* arg) -> void* {
            const Start& s = *static_cast<Start*>(arg);
            emu::block = s.block;
            blockIdx = uint3{s.b, 0, 0};
            threadIdx = uint3{s.t, 0, 0};
            gridDim = dim3{s.grid, 1, 1};
            (*s.body)();
            return nullptr;
        };
        if (pthread_create(&ids[i], &attr, run, &starts[i]) != 0) {
            // threads already started wait at barriers that can never fill: give up loudly
            std::abort();
        }
    }
    for (pthread_t id : ids) pthread_join(id, nullptr);
    pthread_attr_destroy(&attr);
}

// Runs body() as the blocks of a grid (x, y, z), one block after the other, each of `threads` GPU
// threads at once (kernels whose blocks never wait for each other; see QR_EMULATE_STATIC_SHARED).
template <class Body>
void launch_serial(dim3 grid, unsigned threads, std::size_t shared_bytes, Body body) {
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x)
                launch(1, threads, shared_bytes, [&] {
                    blockIdx = uint3{x, y, z};
                    gridDim = grid;
                    body();
                });
}

}  // namespace emu
