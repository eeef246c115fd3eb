/*
 * pssm_dialect.h - the one header every kernel of kernels/ is written against.
 *
 * Three targets compile the same kernel sources:
 *   cuda  nvcc, device code only (a fatbinary driven through the driver API)
 *   hip   hipcc --genco (a code-object bundle driven through the module API)
 *   sim   the host C compiler; backends/sim runs each block with one fiber per thread.
 *         The including file defines PSSM_SIM_WARP (32 or 64) and PSSM_SIM_PREFIX.
 *
 * Kernels use nothing but what is defined here (plus C arithmetic), in the common subset of C11
 * and C++: no templates, classes, references or CUB.  Specialisations are stamped out by
 * including one body several times under different macro definitions.
 *
 * Kernel parameters are one struct passed by value (kernels/params.h): the same bytes are handed
 * to cuLaunchKernel, hipModuleLaunchKernel and the simulator, so no target needs per-kernel glue.
 */
#ifndef PSSM_DIALECT_H
#define PSSM_DIALECT_H

#if defined(__HIP__) || defined(__HIPCC__)
#define PSSM_TARGET_HIP 1
#elif defined(__CUDACC__) || defined(__CUDA__)
#define PSSM_TARGET_CUDA 1
#else
#define PSSM_TARGET_SIM 1
#endif

#include <stdint.h>

/* ================================================================= qualifiers, indices */

#if defined(PSSM_TARGET_CUDA) || defined(PSSM_TARGET_HIP)

#if defined(PSSM_TARGET_HIP)
#include <hip/hip_runtime.h>
#elif defined(__clang__) && !defined(__NVCC__)
/* clang as the CUDA device compiler (--cuda-device-only -nocudainc -nocudalib), which still
 * emits sm_60 PTX: no CUDA headers, so the few keywords and the libdevice math it needs are
 * declared here (libdevice is linked with -mlink-builtin-bitcode). */
#define PSSM_CUDA_CLANG 1
#include <__clang_cuda_builtin_vars.h>
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
extern "C" __device__ float __nv_expf(float);
extern "C" __device__ float __nv_log1pf(float);
extern "C" __device__ float __nv_exp2f(float);
#define expf __nv_expf
#define log1pf __nv_log1pf
#define exp2f __nv_exp2f
#define fminf __builtin_fminf /* llvm.minnum / maxnum: PTX min.f32 / max.f32 */
#define fmaxf __builtin_fmaxf
#endif

#define PSSM_RESTRICT __restrict__
#define PSSM_DEVICE static __device__ __forceinline__
#define PSSM_FORCEINLINE __forceinline__
#define PSSM_ALIGN(n) __attribute__((aligned(n)))
/* ptr + off where ptr may be an absent optional operand (null, with off 0): C++ defines
 * null + 0, so the GPU targets add as ever (the sim's form cost the Mamba-1 decode kernel 20
 * registers on sm_90). */
#define PSSM_OPT_OFFSET(ptr, off) ((ptr) + (off))

/* PSSM_KERNEL(name, params_type, p) { body }  defines kernel `name` taking `p` by value. */
#define PSSM_KERNEL(name, type, p) extern "C" __global__ void name(const type p)
/* Same, with a bound on the threads per block (lets the compiler budget registers). */
#define PSSM_KERNEL_BOUNDED(name, type, p, max_threads)                                        \
    extern "C" __global__ void __launch_bounds__(max_threads) name(const type p)
/* ... and at least min_blocks blocks of max_threads resident per multiprocessor (CUDA: the
 * register budget follows; HIP's second bound means something else and is left out). */
#if defined(PSSM_TARGET_CUDA)
/* The threads a multiprocessor of the target holds: a min_blocks past them is ignored by ptxas
 * (with a warning, and no register budget at all), so it is clamped to what fits (sm_75: 1024;
 * sm_86, sm_87, sm_89, sm_12x: 1536; elsewhere 2048). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 750
#define PSSM_SM_THREADS 1024
#elif defined(__CUDA_ARCH__) && ((__CUDA_ARCH__ >= 860 && __CUDA_ARCH__ <= 890) || __CUDA_ARCH__ >= 1200)
#define PSSM_SM_THREADS 1536
#else
#define PSSM_SM_THREADS 2048
#endif
#define PSSM_KERNEL_BOUNDED_MIN(name, type, p, max_threads, min_blocks)                         \
    extern "C" __global__ void __launch_bounds__(                                                \
        max_threads, (min_blocks) * (max_threads) <= PSSM_SM_THREADS                             \
                         ? (min_blocks)                                                          \
                         : PSSM_SM_THREADS / (max_threads)) name(const type p)
#else
#define PSSM_KERNEL_BOUNDED_MIN(name, type, p, max_threads, min_blocks)                         \
    PSSM_KERNEL_BOUNDED(name, type, p, max_threads)
#endif
/* ... or a register cap of its own, max_regs a thread (max_regs * max_threads must fit the
 * multiprocessor's 64K registers): where ptxas, bounded by threads alone, takes registers that
 * cost resident blocks, and no min_blocks gives the cap wanted (nvcc 12.4+: __maxnreg__, which
 * excludes __launch_bounds__; clang, HIP and older nvcc: PSSM_KERNEL_BOUNDED). */
#if defined(PSSM_TARGET_CUDA) && defined(__NVCC__) &&                                            \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 4))
#define PSSM_KERNEL_MAXREG(name, type, p, max_threads, max_regs)                                \
    extern "C" __global__ void __maxnreg__(max_regs) name(const type p)
#else
#define PSSM_KERNEL_MAXREG(name, type, p, max_threads, max_regs)                                \
    PSSM_KERNEL_BOUNDED(name, type, p, max_threads)
#endif

#if defined(PSSM_TARGET_HIP) && defined(PSSM_HIP_NOGPULIB)
/* HIP by a clang without ROCm device libraries of its targets (-nogpulib: Debian's clang 19
 * for gfx942/gfx11xx/gfx12xx, whose ROCm 5.2 libraries stop at gfx1036): the indices, the
 * barrier and the little math the kernels use come from clang's builtins instead of the
 * headers' ockl/ocml calls.  The grid size of the dispatch counts work-items. */
#define PSSM_THREAD_X ((int)__builtin_amdgcn_workitem_id_x())
#define PSSM_THREAD_Y ((int)__builtin_amdgcn_workitem_id_y())
#define PSSM_BLOCK_X ((int64_t)__builtin_amdgcn_workgroup_id_x())
#define PSSM_BLOCK_Y ((int64_t)__builtin_amdgcn_workgroup_id_y())
#define PSSM_BLOCK_Z ((int64_t)__builtin_amdgcn_workgroup_id_z())
#define PSSM_BLOCKDIM_X ((int)__builtin_amdgcn_workgroup_size_x())
#define PSSM_BLOCKDIM_Y ((int)__builtin_amdgcn_workgroup_size_y())
#define PSSM_GRIDDIM_X ((int64_t)(__builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x()))
#define PSSM_GRIDDIM_Y ((int64_t)(__builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y()))
#define PSSM_GRIDDIM_Z ((int64_t)(__builtin_amdgcn_grid_size_z() / __builtin_amdgcn_workgroup_size_z()))
#define PSSM_SYNC()                                                                                \
    do {                                                                                           \
        __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");                                     \
        __builtin_amdgcn_s_barrier();                                                              \
        __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");                                     \
    } while (0)
/* log1p(x) = x * log(u) / (u - 1) with u = 1 + x rounded (exact where u == 1): a few ulp. */
static __device__ __forceinline__ float pssm_hip_log1pf(float x)
{
    const float u = 1.0f + x;
    return u == 1.0f ? x : __builtin_logf(u) * (x / (u - 1.0f));
}
#define log1pf pssm_hip_log1pf
#else
#define PSSM_THREAD_X ((int)threadIdx.x)
#define PSSM_THREAD_Y ((int)threadIdx.y)
#define PSSM_BLOCK_X ((int64_t)blockIdx.x)
#define PSSM_BLOCK_Y ((int64_t)blockIdx.y)
#define PSSM_BLOCK_Z ((int64_t)blockIdx.z)
#define PSSM_BLOCKDIM_X ((int)blockDim.x)
#define PSSM_BLOCKDIM_Y ((int)blockDim.y)
#define PSSM_GRIDDIM_X ((int64_t)gridDim.x)
#define PSSM_GRIDDIM_Y ((int64_t)gridDim.y)
#define PSSM_GRIDDIM_Z ((int64_t)gridDim.z)
#define PSSM_SYNC() __syncthreads()
#endif

/* Block-shared arrays.  Declare them at the top of a kernel, before any branch.  Static arrays
 * stay within 48 KB a block (CUDA's limit for them); PSSM_SHARED_DYNAMIC names the block's
 * dynamic shared memory, 16-byte aligned, as many bytes as the launch gives
 * (PSSM_LAUNCH_SHARED, backends/gpu/gpu.h), past 48 KB where the device allows it. */
#define PSSM_SHARED(type, name, count) __shared__ type name[count]
#define PSSM_SHARED_2D(type, name, rows, cols) __shared__ type name[rows][cols]
/* (one name and one element type for every kernel: CUDA gives them all one extern array) */
#define PSSM_SHARED_DYNAMIC(type, name)                                                         \
    extern __shared__ pssm_vec16 pssm_dynamic_shared_[];                                       \
    type *const name = (type *)pssm_dynamic_shared_

#if defined(PSSM_TARGET_HIP)
#define PSSM_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
/* (a wavefront runs in lockstep: the fences order its shared-memory accesses) */
#define PSSM_SYNC_WARP()                                                                           \
    do {                                                                                           \
        __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");                                     \
        __builtin_amdgcn_wave_barrier();                                                           \
        __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");                                     \
    } while (0)
#define PSSM_SHFL_XOR_F32(v, m) __shfl_xor((float)(v), (m))
#define PSSM_SHFL_UP_F32(v, d) __shfl_up((float)(v), (unsigned)(d))
#define PSSM_SHFL_DOWN_F32(v, d) __shfl_down((float)(v), (unsigned)(d))
#define PSSM_SHFL_IDX_F32(v, l) __shfl((float)(v), (l))
#define PSSM_SHFL_XOR_I32(v, m) __shfl_xor((int)(v), (m))
#define PSSM_SHFL_UP_I32(v, d) __shfl_up((int)(v), (unsigned)(d))
#define PSSM_SHFL_DOWN_I32(v, d) __shfl_down((int)(v), (unsigned)(d))
#define PSSM_SHFL_IDX_I32(v, l) __shfl((int)(v), (l))
#else
#define PSSM_WARP_SIZE 32
/* Every lane of the warp takes part in every shuffle (checked by the sim target), and in every
 * PSSM_SYNC_WARP(): the warp's barrier, after which each lane sees the shared-memory writes the
 * others made before it (what a warp-private shared tile needs between its writes and reads). */
#define PSSM_FULL_MASK 0xffffffffu
#if defined(PSSM_CUDA_CLANG) /* the intrinsics behind __shfl_*_sync; c = 0x1f clamps at the warp */
#define PSSM_SYNC_WARP() __nvvm_bar_warp_sync(PSSM_FULL_MASK)
#define PSSM_SHFL_XOR_F32(v, m) __nvvm_shfl_sync_bfly_f32(PSSM_FULL_MASK, (float)(v), (m), 0x1f)
#define PSSM_SHFL_UP_F32(v, d) __nvvm_shfl_sync_up_f32(PSSM_FULL_MASK, (float)(v), (int)(d), 0)
#define PSSM_SHFL_DOWN_F32(v, d) __nvvm_shfl_sync_down_f32(PSSM_FULL_MASK, (float)(v), (int)(d), 0x1f)
#define PSSM_SHFL_IDX_F32(v, l) __nvvm_shfl_sync_idx_f32(PSSM_FULL_MASK, (float)(v), (l), 0x1f)
#define PSSM_SHFL_XOR_I32(v, m) __nvvm_shfl_sync_bfly_i32(PSSM_FULL_MASK, (int)(v), (m), 0x1f)
#define PSSM_SHFL_UP_I32(v, d) __nvvm_shfl_sync_up_i32(PSSM_FULL_MASK, (int)(v), (int)(d), 0)
#define PSSM_SHFL_DOWN_I32(v, d) __nvvm_shfl_sync_down_i32(PSSM_FULL_MASK, (int)(v), (int)(d), 0x1f)
#define PSSM_SHFL_IDX_I32(v, l) __nvvm_shfl_sync_idx_i32(PSSM_FULL_MASK, (int)(v), (l), 0x1f)
#else
#define PSSM_SYNC_WARP() __syncwarp(PSSM_FULL_MASK)
#define PSSM_SHFL_XOR_F32(v, m) __shfl_xor_sync(PSSM_FULL_MASK, (float)(v), (m))
#define PSSM_SHFL_UP_F32(v, d) __shfl_up_sync(PSSM_FULL_MASK, (float)(v), (unsigned)(d))
#define PSSM_SHFL_DOWN_F32(v, d) __shfl_down_sync(PSSM_FULL_MASK, (float)(v), (unsigned)(d))
#define PSSM_SHFL_IDX_F32(v, l) __shfl_sync(PSSM_FULL_MASK, (float)(v), (l))
#define PSSM_SHFL_XOR_I32(v, m) __shfl_xor_sync(PSSM_FULL_MASK, (int)(v), (m))
#define PSSM_SHFL_UP_I32(v, d) __shfl_up_sync(PSSM_FULL_MASK, (int)(v), (unsigned)(d))
#define PSSM_SHFL_DOWN_I32(v, d) __shfl_down_sync(PSSM_FULL_MASK, (int)(v), (unsigned)(d))
#define PSSM_SHFL_IDX_I32(v, l) __shfl_sync(PSSM_FULL_MASK, (int)(v), (l))
#endif
#endif

#else /* ------------------------------------------------------------------ sim target */

#include <math.h>
#include <stddef.h>
#include "../backends/sim/sim_runtime.h"
#include "pssm_float16.h"

#if !defined(PSSM_SIM_WARP) || !defined(PSSM_SIM_PREFIX)
#error "the sim target needs PSSM_SIM_WARP and PSSM_SIM_PREFIX"
#endif

#define PSSM_RESTRICT restrict
#define PSSM_DEVICE static inline
#define PSSM_FORCEINLINE inline
#define PSSM_ALIGN(n) __attribute__((aligned(n)))
/* C leaves even null + 0 undefined (UBSan's pointer-overflow check): the sim tests first. */
#define PSSM_OPT_OFFSET(ptr, off) ((ptr) ? (ptr) + (off) : (ptr))

#define PSSM_SIM_CAT_(a, b) a##b
#define PSSM_SIM_CAT(a, b) PSSM_SIM_CAT_(a, b)
/* The simulator calls every kernel through one signature: void entry(const void *params). */
#define PSSM_KERNEL(name, type, p)                                                              \
    static void name##_body(const type p);                                                      \
    void PSSM_SIM_CAT(PSSM_SIM_PREFIX, name)(const void *params)                                \
    {                                                                                           \
        name##_body(*(const type *)params);                                                     \
    }                                                                                           \
    static void name##_body(const type p)
#define PSSM_KERNEL_BOUNDED(name, type, p, max_threads) PSSM_KERNEL(name, type, p)
#define PSSM_KERNEL_BOUNDED_MIN(name, type, p, max_threads, min_blocks) PSSM_KERNEL(name, type, p)
#define PSSM_KERNEL_MAXREG(name, type, p, max_threads, max_regs) PSSM_KERNEL(name, type, p)

#define PSSM_THREAD_X ((int)pssm_sim_self->thread.x)
#define PSSM_THREAD_Y ((int)pssm_sim_self->thread.y)
#define PSSM_BLOCK_X ((int64_t)pssm_sim_self->block.x)
#define PSSM_BLOCK_Y ((int64_t)pssm_sim_self->block.y)
#define PSSM_BLOCK_Z ((int64_t)pssm_sim_self->block.z)
#define PSSM_BLOCKDIM_X ((int)pssm_sim_self->block_dim.x)
#define PSSM_BLOCKDIM_Y ((int)pssm_sim_self->block_dim.y)
#define PSSM_GRIDDIM_X ((int64_t)pssm_sim_self->grid_dim.x)
#define PSSM_GRIDDIM_Y ((int64_t)pssm_sim_self->grid_dim.y)
#define PSSM_GRIDDIM_Z ((int64_t)pssm_sim_self->grid_dim.z)

/* The k-th shared declaration a thread reaches maps to the block's k-th arena slot; the arena
 * is filled with 0xff (NaN for floats) when a block starts, so a read before a write shows. */
#define PSSM_SHARED(type, name, count)                                                          \
    type *const name = (type *)pssm_sim_shared(sizeof(type) * (size_t)(count), _Alignof(type), \
                                               __FILE__, __LINE__)
#define PSSM_SHARED_2D(type, name, rows, cols)                                                  \
    type(*const name)[cols] = (type(*)[cols])pssm_sim_shared(                                   \
        sizeof(type) * (size_t)(rows) * (size_t)(cols), _Alignof(type), __FILE__, __LINE__)
#define PSSM_SHARED_DYNAMIC(type, name)                                                         \
    type *const name = (type *)pssm_sim_dynamic_shared(__FILE__, __LINE__)
#define PSSM_SYNC() pssm_sim_barrier(__FILE__, __LINE__)

#define PSSM_WARP_SIZE PSSM_SIM_WARP
#define PSSM_SIM_SHFL(kind, v, a) pssm_sim_shfl(kind, (v), (a), __FILE__, __LINE__)
/* every lane of the warp meets at a shuffle: the warp barrier */
#define PSSM_SYNC_WARP() ((void)PSSM_SIM_SHFL(PSSM_SIM_IDX, 0u, 0))
#define PSSM_SHFL_XOR_F32(v, m) pssm_sim_f32(PSSM_SIM_SHFL(PSSM_SIM_XOR, pssm_sim_u32f(v), m))
#define PSSM_SHFL_UP_F32(v, d) pssm_sim_f32(PSSM_SIM_SHFL(PSSM_SIM_UP, pssm_sim_u32f(v), d))
#define PSSM_SHFL_DOWN_F32(v, d) pssm_sim_f32(PSSM_SIM_SHFL(PSSM_SIM_DOWN, pssm_sim_u32f(v), d))
#define PSSM_SHFL_IDX_F32(v, l) pssm_sim_f32(PSSM_SIM_SHFL(PSSM_SIM_IDX, pssm_sim_u32f(v), l))
#define PSSM_SHFL_XOR_I32(v, m) ((int)PSSM_SIM_SHFL(PSSM_SIM_XOR, (uint32_t)(int)(v), m))
#define PSSM_SHFL_UP_I32(v, d) ((int)PSSM_SIM_SHFL(PSSM_SIM_UP, (uint32_t)(int)(v), d))
#define PSSM_SHFL_DOWN_I32(v, d) ((int)PSSM_SIM_SHFL(PSSM_SIM_DOWN, (uint32_t)(int)(v), d))
#define PSSM_SHFL_IDX_I32(v, l) ((int)PSSM_SIM_SHFL(PSSM_SIM_IDX, (uint32_t)(int)(v), l))

static inline uint32_t pssm_sim_u32f(float f) { return pssm_f32_bits(f); }
static inline float pssm_sim_f32(uint32_t u) { return pssm_bits_f32(u); }

#endif /* targets */

/* ================================================================= loops */

/* Loops over compile-time trip counts that index register arrays must unroll, so that the
 * arrays keep constant indices (a run-time index moves them to local memory); cold paths stay
 * loops, which unrolled would only grow the code. */
#if defined(PSSM_TARGET_SIM)
#define PSSM_UNROLL
#define PSSM_NOUNROLL
#else
#define PSSM_UNROLL _Pragma("unroll")
#define PSSM_NOUNROLL _Pragma("unroll 1")
#endif

/* ================================================================= derived indices */

/* Linear thread index inside the block (blocks are 1-D or 2-D), lane and warp of it. */
#define PSSM_TID (PSSM_THREAD_X + PSSM_THREAD_Y * PSSM_BLOCKDIM_X)
#define PSSM_LANE (PSSM_TID % PSSM_WARP_SIZE)
#define PSSM_WARP_ID (PSSM_TID / PSSM_WARP_SIZE)

/* ================================================================= warp collectives
 * Written against PSSM_WARP_SIZE; every lane of the warp must call them. */

PSSM_DEVICE float pssm_warp_sum(float v)
{
    for (int o = PSSM_WARP_SIZE / 2; o > 0; o >>= 1)
        v += PSSM_SHFL_XOR_F32(v, o);
    return v;
}

PSSM_DEVICE float pssm_warp_max(float v)
{
    for (int o = PSSM_WARP_SIZE / 2; o > 0; o >>= 1) {
        float w = PSSM_SHFL_XOR_F32(v, o);
        v = w > v ? w : v;
    }
    return v;
}

/* Sum over aligned teams of `team` lanes (a power of two <= the warp width); every lane gets
 * its team's sum. */
PSSM_DEVICE float pssm_team_sum(float v, int team)
{
    for (int o = PSSM_WARP_SIZE / 2; o > 0; o >>= 1) {
        float w = PSSM_SHFL_XOR_F32(v, o); /* all lanes shuffle; only in-team offsets count */
        if (o < team)
            v += w;
    }
    return v;
}

/* Inclusive prefix sum over the warp. */
PSSM_DEVICE float pssm_warp_scan_sum(float v)
{
    int lane = PSSM_LANE;
    for (int o = 1; o < PSSM_WARP_SIZE; o <<= 1) {
        float w = PSSM_SHFL_UP_F32(v, o);
        if (lane >= o)
            v += w;
    }
    return v;
}

/* ================================================================= 16-bit floats
 * Storage is uint16_t in every target; arithmetic is always float. */

typedef uint16_t pssm_f16;
typedef uint16_t pssm_bf16;

PSSM_DEVICE float pssm_as_float(uint32_t u)
{
#if defined(PSSM_TARGET_SIM)
    return pssm_bits_f32(u);
#else
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
#endif
}

PSSM_DEVICE uint32_t pssm_as_uint(float f)
{
#if defined(PSSM_TARGET_SIM)
    return pssm_f32_bits(f);
#else
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    return u;
#endif
}

PSSM_DEVICE float pssm_load_bf16(pssm_bf16 h) { return pssm_as_float((uint32_t)h << 16); }

/* Round to nearest even; NaN stays a NaN.  One instruction on sm_80 and newer (the software
 * rounding takes about seven with a branch: the bulk of the SSD kernels' operand conversions). */
PSSM_DEVICE pssm_bf16 pssm_store_bf16(float f)
{
#if defined(PSSM_TARGET_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    pssm_bf16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    uint32_t u = pssm_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN stays a (quiet) NaN */
        return (pssm_bf16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (pssm_bf16)(u >> 16);
#endif
}

/* Two bf16 stores at once, packed lo | hi << 16, rounded as pssm_store_bf16 (NaN stays NaN):
 * one instruction on sm_80 and newer, where the software rounding would take about seven per
 * element, the bulk of a memory-bound epilogue's work. */
PSSM_DEVICE uint32_t pssm_store_bf16x2(float lo, float hi)
{
#if defined(PSSM_TARGET_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint32_t u;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
    return u;
#else
    return (uint32_t)pssm_store_bf16(lo) | (uint32_t)pssm_store_bf16(hi) << 16;
#endif
}

PSSM_DEVICE float pssm_load_f16(pssm_f16 h)
{
#if defined(PSSM_TARGET_SIM)
    return pssm_f16_to_f32(h);
#elif defined(PSSM_TARGET_HIP)
    _Float16 v;
    __builtin_memcpy(&v, &h, 2);
    return (float)v;
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#endif
}

PSSM_DEVICE pssm_f16 pssm_store_f16(float f)
{
#if defined(PSSM_TARGET_SIM)
    return pssm_f32_to_f16(f);
#elif defined(PSSM_TARGET_HIP)
    _Float16 v = (_Float16)f;
    pssm_f16 h;
    __builtin_memcpy(&h, &v, 2);
    return h;
#else
    pssm_f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#endif
}

/* Two f16 stores at once, packed lo | hi << 16, each rounded as pssm_store_f16 (the twin of
 * pssm_store_bf16x2, so that code stamped per 16-bit dtype names one function). */
PSSM_DEVICE uint32_t pssm_store_f16x2(float lo, float hi)
{
    return (uint32_t)pssm_store_f16(lo) | (uint32_t)pssm_store_f16(hi) << 16;
}

PSSM_DEVICE float pssm_load_f32(float v) { return v; }
PSSM_DEVICE float pssm_store_f32(float v) { return v; }

/* Element of a tensor whose dtype is known only at run time (weights, biases: read once). */
#define PSSM_DT_F32 0
#define PSSM_DT_F16 1
#define PSSM_DT_BF16 2
PSSM_DEVICE float pssm_load_any(const void *base, int64_t i, int dtype)
{
    if (dtype == PSSM_DT_F32)
        return ((const float *)base)[i];
    if (dtype == PSSM_DT_F16)
        return pssm_load_f16(((const pssm_f16 *)base)[i]);
    return pssm_load_bf16(((const pssm_bf16 *)base)[i]);
}

/* Element i of a tensor whose dtype is known only at run time, as a new base pointer. */
PSSM_DEVICE const void *pssm_elem_any(const void *base, int64_t i, int dtype)
{
    return (const char *)base + i * (dtype == PSSM_DT_F32 ? 4 : 2);
}

/* Stores v at element i of a tensor whose dtype is known only at run time (rounded once). */
PSSM_DEVICE void pssm_store_any(void *base, int64_t i, int dtype, float v)
{
    if (dtype == PSSM_DT_F32)
        ((float *)base)[i] = v;
    else if (dtype == PSSM_DT_F16)
        ((pssm_f16 *)base)[i] = pssm_store_f16(v);
    else
        ((pssm_bf16 *)base)[i] = pssm_store_bf16(v);
}

/* A 32-bit word that may alias any type (two 16-bit values moved at once). */
typedef uint32_t __attribute__((may_alias)) pssm_u32a;

typedef struct PSSM_ALIGN(8) pssm_f32x2 { /* two floats moved as one 8-byte access */
    float v[2];
} pssm_f32x2;

/* 16 bytes, for vector loads and stores (the pointer must be 16-byte aligned). */
typedef struct PSSM_ALIGN(16) pssm_vec16 {
    uint32_t w[4];
} pssm_vec16;

/* 8 bytes (four 16-bit values), for vector loads (the pointer must be 8-byte aligned). */
typedef struct PSSM_ALIGN(8) pssm_vec8 {
    uint32_t w[2];
} pssm_vec8;

/* Four adjacent values at base + i, rounded as pssm_store_any, by one store: 16 bytes for f32,
 * 8 for f16 and bf16 (base + i aligned to that). */
PSSM_DEVICE void pssm_store_any4(void *base, int64_t i, int dtype, const float v[4])
{
    if (dtype == PSSM_DT_F32) {
        pssm_vec16 o;
        PSSM_UNROLL
        for (int e = 0; e < 4; e++)
            o.w[e] = pssm_as_uint(v[e]);
        *(pssm_vec16 *)((float *)base + i) = o;
        return;
    }
    uint32_t h[4];
    PSSM_UNROLL
    for (int e = 0; e < 4; e++)
        h[e] = dtype == PSSM_DT_F16 ? pssm_store_f16(v[e]) : pssm_store_bf16(v[e]);
    pssm_vec8 o;
    o.w[0] = h[0] | h[1] << 16;
    o.w[1] = h[2] | h[3] << 16;
    *(pssm_vec8 *)((uint16_t *)base + i) = o;
}

/* ================================================================= asynchronous copies
 * pssm_copy_async16(dst, src, full): 16 bytes from global src to shared dst (both 16-byte aligned),
 * issued without waiting for them; where full is 0, dst gets zeros and src is not read (it must
 * still be a valid address).  pssm_copy_async16_at / _full take the destination as a pssm_saddr
 * (below) for loops of copies; _full reads all 16 bytes.  PSSM_COPY_WAIT_ALL() waits for every copy
 * this thread issued; a block barrier after it makes them visible to the block.  PSSM_COPY_COMMIT()
 * closes a group of the copies issued since the last one, PSSM_COPY_WAIT(n) (n a constant) waits
 * until at most the n newest groups are still in flight: a tile for the next step loads while this
 * step's waits end.  On NVIDIA sm_80 and newer these are cp.async, whose loads are in flight
 * without holding registers; on hip and older NVIDIA the copy happens at once and the wait does
 * nothing; the sim can hold copies back until their wait (below). */
#if defined(PSSM_TARGET_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/* pssm_saddr: a shared-memory destination as the copies take it.  Here the 32-bit shared-window
 * address: a loop of copies converts its first destination once (pssm_saddr_of) and adds byte
 * offsets (PSSM_SADDR_ADD), which the copy instruction takes as an immediate (converted per
 * copy, the conversions and their 64-bit arithmetic were ~13 instructions a copy and 17% of the
 * SSD output kernel's instructions, H200 run 61).  Elsewhere a byte pointer. */
typedef uint32_t pssm_saddr;
PSSM_DEVICE pssm_saddr pssm_saddr_of(const void *p)
{
    uint32_t d;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(d) : "l"(p));
    return d;
}
#define PSSM_SADDR_ADD(a, bytes) ((a) + (uint32_t)(bytes))
PSSM_DEVICE void pssm_copy_async16_at(pssm_saddr d, const void *src, int full)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src),
                 "r"(full ? 16 : 0)
                 : "memory");
}
/* the same, the whole 16 bytes always read (a full tile: no size operand to select) */
PSSM_DEVICE void pssm_copy_async16_full(pssm_saddr d, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}
#define PSSM_COPY_WAIT_ALL() asm volatile("cp.async.wait_all;" ::: "memory")
#define PSSM_COPY_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define PSSM_COPY_WAIT(n) asm volatile("cp.async.wait_group %0;" ::"n"(n) : "memory")
#elif defined(PSSM_TARGET_SIM)
/* The sim reads the source at once and writes the destination at once, or, where the launch
 * defers copies (sim_launch.h), only at the wait that covers its group: a read of a tile
 * before its wait, or a write over a tile in flight, then gives other results than the copy
 * at once, as such a race would on a GPU. */
typedef char *pssm_saddr;
PSSM_DEVICE pssm_saddr pssm_saddr_of(const void *p) { return (char *)p; }
#define PSSM_SADDR_ADD(a, bytes) ((a) + (bytes))
PSSM_DEVICE void pssm_copy_async16_at(pssm_saddr d, const void *src, int full)
{
    pssm_sim_copy16(d, full ? src : NULL);
}
PSSM_DEVICE void pssm_copy_async16_full(pssm_saddr d, const void *src) { pssm_sim_copy16(d, src); }
#define PSSM_COPY_WAIT_ALL() pssm_sim_copy_wait(-1)
#define PSSM_COPY_COMMIT() pssm_sim_copy_commit()
#define PSSM_COPY_WAIT(n) pssm_sim_copy_wait(n)
#else
typedef char *pssm_saddr;
PSSM_DEVICE pssm_saddr pssm_saddr_of(const void *p) { return (char *)p; }
#define PSSM_SADDR_ADD(a, bytes) ((a) + (bytes))
PSSM_DEVICE void pssm_copy_async16_at(pssm_saddr d, const void *src, int full)
{
    pssm_vec16 v;
    v.w[0] = v.w[1] = v.w[2] = v.w[3] = 0u;
    if (full)
        v = *(const pssm_vec16 *)src;
    *(pssm_vec16 *)d = v;
}
PSSM_DEVICE void pssm_copy_async16_full(pssm_saddr d, const void *src)
{
    *(pssm_vec16 *)d = *(const pssm_vec16 *)src;
}
#define PSSM_COPY_WAIT_ALL() ((void)0)
#define PSSM_COPY_COMMIT() ((void)0)
#define PSSM_COPY_WAIT(n) ((void)0)
#endif
PSSM_DEVICE void pssm_copy_async16(void *dst, const void *src, int full)
{
    pssm_copy_async16_at(pssm_saddr_of(dst), src, full);
}

/* ================================================================= math
 * exp2 is the hot special function of the scan: the hardware unit on GPUs. */

#define PSSM_LOG2E 1.4426950408889634f

PSSM_DEVICE float pssm_exp2f(float x)
{
#if defined(PSSM_TARGET_CUDA)
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return exp2f(x);
#endif
}

PSSM_DEVICE float pssm_expf(float x) { return pssm_exp2f(x * PSSM_LOG2E); }

/*
 * 2^x on the FMA units instead of the special-function unit: for kernels with more exps than
 * that unit issues (16 a clock on an NVIDIA SM against 128 FMAs), which move a share of their
 * exps here so that both units work.  x is split into the nearest integer i (the 1.5 * 2^23
 * rounding trick, exact for |x| < 2^22) and f in [-0.5, 0.5]; 2^f is a degree-5 polynomial
 * (relative error 2.4e-7 in float, about the hardware ex2's 2 ulp), and i goes into the
 * exponent by an integer add.  x is clamped to [-126, 127]: below, a result under 2^-126 stands
 * for ex2.ftz's 0 (a tiny number, not 0); above, the largest power instead of inf.
 */
PSSM_DEVICE float pssm_exp2f_poly(float x)
{
    x = fminf(fmaxf(x, -126.0f), 127.0f);
    const float t = x + 12582912.0f; /* 1.5 * 2^23: i in the low mantissa bits of t */
    const float f = x - (t - 12582912.0f);
    float p = 0.001327647129073739f;
    p = p * f + 0.009675541892647743f;
    p = p * f + 0.05550713092088699f;
    p = p * f + 0.24022120237350464f;
    p = p * f + 0.6931469440460205f;
    p = p * f + 1.0000001192092896f;
    /* t's bits are 0x4B400000 + i; shifted by 23 only i << 23 stays (mod 2^32) */
    return pssm_as_float(pssm_as_uint(p) + (pssm_as_uint(t) << 23));
}

/* 1/x by the hardware unit (about 1 ulp; 0 for x = inf): one instruction instead of the IEEE
 * division's sequence and slow-path branch, for memory-bound epilogues (the conv's silu). */
PSSM_DEVICE float pssm_rcpf(float x)
{
#if defined(PSSM_TARGET_CUDA)
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#elif defined(PSSM_TARGET_HIP)
    return __builtin_amdgcn_rcpf(x);
#else
    return 1.0f / x;
#endif
}

/* log2(x) by the hardware unit (relative error about 2^-22; -inf for 0): one instruction instead
 * of log1pf's polynomial, for per-token math beside the scan's exp-bound loop (its softplus). */
PSSM_DEVICE float pssm_log2f(float x)
{
#if defined(PSSM_TARGET_CUDA)
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#elif defined(PSSM_TARGET_HIP)
    return __log2f(x);
#else
    return log2f(x);
#endif
}

/* sqrt(x), correctly rounded (the norms' 1 / sqrt(var + eps)): the C library's, or the
 * compiler's builtin where no device math library is included (clang's CUDA and HIP without
 * headers), which lowers to the same instruction. */
PSSM_DEVICE float pssm_sqrtf(float x)
{
#if defined(PSSM_CUDA_CLANG) || (defined(PSSM_TARGET_HIP) && defined(PSSM_HIP_NOGPULIB))
    return __builtin_sqrtf(x);
#else
    return sqrtf(x);
#endif
}

/* Accurate forms (the C library's), for code where a few more instructions do not matter. */
PSSM_DEVICE float pssm_softplusf(float v) { return v <= 20.0f ? log1pf(expf(v)) : v; }
PSSM_DEVICE float pssm_siluf(float v) { return v / (1.0f + expf(-v)); }

/* Fast forms through the special-function units, for epilogues of memory-bound kernels and the
 * per-token math beside the scan's exp-bound loop: relative error a few 1e-6 over the whole
 * range (checked by test_properties' pointwise_range on every backend). */
PSSM_DEVICE float pssm_silu_fast(float v) { return v * pssm_rcpf(1.0f + pssm_exp2f(-v * PSSM_LOG2E)); }

/* sigmoid(v) = 1 / (1 + e^-v), and d silu / dv = sigmoid(v) * (1 + v * (1 - sigmoid(v))), for
 * the backward passes (same units and error as pssm_silu_fast). */
PSSM_DEVICE float pssm_sigmoid_fast(float v) { return pssm_rcpf(1.0f + pssm_exp2f(-v * PSSM_LOG2E)); }
PSSM_DEVICE float pssm_dsilu_fast(float v)
{
    const float s = pssm_sigmoid_fast(v);
    return s * (1.0f + v * (1.0f - s));
}

PSSM_DEVICE float pssm_softplus_fast(float v)
{
    /* Branch-free on purpose: both forms cost a few instructions, while a branch splits the
     * scan's unrolled token loop into basic blocks the scheduler cannot interleave (the
     * branching form measured 6.5% slower on the H200 scan, RESULTS.md run 2). */
    const float e = pssm_exp2f(v * PSSM_LOG2E);
    /* below -3 log(1 + e) would cancel as 1 + e rounds: its series, to e^5 (error e^5/6) */
    const float series = e * (1.0f + e * (-0.5f + e * (1.0f / 3.0f + e * (-0.25f + e * 0.2f))));
    const float logged = pssm_log2f(1.0f + e) * 0.6931471805599453f; /* error ~3e-6 above -3 */
    const float r = v < -3.0f ? series : logged;
    return v > 20.0f ? v : r;
}

/* softplus (as pssm_softplus_fast) and, into *grad, its derivative sigmoid(v) (1 above 20),
 * from the same exp: for the backward passes, which need both. */
PSSM_DEVICE float pssm_softplus_grad_fast(float v, float *grad)
{
    const float e = pssm_exp2f(v * PSSM_LOG2E);
    const float series = e * (1.0f + e * (-0.5f + e * (1.0f / 3.0f + e * (-0.25f + e * 0.2f))));
    const float logged = pssm_log2f(1.0f + e) * 0.6931471805599453f;
    const float r = v < -3.0f ? series : logged;
    *grad = v > 20.0f ? 1.0f : e * pssm_rcpf(1.0f + e);
    return v > 20.0f ? v : r;
}

#endif /* PSSM_DIALECT_H */
