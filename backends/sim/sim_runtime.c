/*
 * sim_runtime.c - the SIMT simulator: runs a launch block by block, one fiber per GPU thread.
 *
 * Fibers.  Each GPU thread of a block runs on its own mmap'ed stack (a guard page below it).
 * A stack is entered once through makecontext/setcontext, which costs a sigprocmask syscall;
 * after that every switch is _setjmp/_longjmp, which costs none.  A fiber that finishes its
 * kernel parks (in fiber_wait), so the next block (or launch) reuses it with a plain
 * _longjmp.  Fibers live in runners (one per OS thread running blocks), which are pooled and
 * reused by later launches; a runner that moves to another OS thread restarts its fibers
 * through makecontext, since a parked fiber may hold the old thread's TLS addresses.
 *
 * Scheduling.  Every ready fiber runs until it waits at a shuffle or a barrier or finishes.
 * Then a warp whose lanes all wait at the same shuffle site exchanges values and resumes; a
 * block whose threads all wait at the same barrier resumes.  With no ready fiber and nothing to
 * complete, the block is stuck: that is reported (it would hang or be undefined on a GPU), the
 * block's fibers are abandoned (restarted on their next use) and the launch stops.
 *
 * Blocks are independent, so a launch spreads them over pssm_sim_host_threads() OS threads.
 * When blocks fail, the lowest failing block is reported and no later block runs, so the
 * message does not depend on the thread count.
 *
 * Not supported: AddressSanitizer (it does not follow stack switches) and x86 shadow stacks.
 */

/* glibc's fortified longjmp refuses jumps onto another stack, which is what a fiber switch is. */
#undef _FORTIFY_SOURCE
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, _setjmp */
#endif

#include "sim_launch.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h> /* macros only: no cost and no dependency outside valgrind */
#define SIM_VALGRIND 1
#endif
#endif

#define SIM_MAX_THREADS 1024         /* per block, as on CUDA                               */
#define SIM_STACK_BYTES (128 * 1024) /* per fiber                                           */
#define SIM_SHARED_BYTES (48 * 1024) /* static shared memory a CUDA block may declare       */
#define SIM_MAX_SLOTS 64             /* shared declarations per block                       */
#define SIM_SHARED_ALIGN 16          /* vector accesses to shared arrays work on the sim     */
/* Every shared array sits between red zones of canary bytes, checked at each barrier and at the
 * end of the block: a write past either end of a shared array (which a GPU may silently accept
 * or fault on) becomes an error naming the array. */
#define SIM_REDZONE 64
#define SIM_CANARY 0xA5
/* The dynamic shared memory comes first (red zones before and after it), the static arrays
 * after it. */
#define SIM_ARENA_BYTES                                                                            \
    (PSSM_SIM_SHARED_MAX + (SIM_MAX_SLOTS + 2) * (SIM_REDZONE + SIM_SHARED_ALIGN))
#define SIM_MAX_HOST_THREADS 64
#define SIM_SPREAD_MIN_THREADS 4096 /* GPU threads a launch needs to be spread over OS threads */

_Thread_local pssm_sim_thread *pssm_sim_self;

enum { F_READY, F_SHUFFLE, F_BARRIER, F_DONE };

typedef struct sim_runner sim_runner;

/* An asynchronous copy held back until its wait (pssm_sim_launch.defer_copies). */
typedef struct sim_copy {
    unsigned char *dst;
    unsigned char bytes[16];
    int group; /* the commit count when it was issued */
} sim_copy;

typedef struct sim_fiber {
    pssm_sim_thread t; /* first: pssm_sim_self points here */
    sim_runner *r;
    jmp_buf jb;   /* where it waits, or parks after its kernel */
    int fresh;    /* not parked: the next resume enters through makecontext */
    int in_kernel; /* inside the kernel of the current block */
    int state;
    const char *file; /* the shuffle or barrier it waits at */
    int line;
    int kind, arg; /* shuffle */
    uint32_t value, result;
    int nshared; /* shared declarations reached in this block */
    sim_copy *copies; /* copies in flight (defer_copies), in issue order */
    int ncopies, copies_cap;
    int commits;      /* groups committed in this block */
    int tid;     /* linear thread index in the block */
    unsigned char *map; /* guard page + stack */
    size_t map_bytes;
    unsigned vg_stack;
    ucontext_t uc;
} sim_fiber;

typedef struct sim_slot {
    size_t bytes, offset;
    const char *file;
    int line;
} sim_slot;

struct sim_runner {
    _Alignas(256) unsigned char arena[SIM_ARENA_BYTES]; /* shared arrays and red zones */
    sim_slot slots[SIM_MAX_SLOTS];
    int nslots;
    size_t arena_used; /* end of the last array (its red zone follows)   */
    size_t declared;   /* bytes of shared arrays, without the red zones */
    size_t dyn_offset, dyn_bytes; /* the dynamic shared memory, first in the arena */
    const char *dyn_file;         /* where the block first named it                */
    int dyn_line;
    sim_fiber *fibers[SIM_MAX_THREADS];
    int nfibers;
    uint64_t owner; /* sim_thread_id() of the OS thread whose fibers these are */
    jmp_buf sched;
    const pssm_sim_launch *launch;
    pssm_sim_dim3 block;
    int nthreads;
    int failed;
    char err[PSSM_ERROR_CAPACITY];
    sim_runner *next_free;
};

/* ---------------------------------------------------------------- messages */

/* "kernels/selftest.h" rather than the build's absolute or ../-laden path. */
static const char *short_path(const char *file)
{
    const char *last = NULL;
    for (const char *p = strstr(file, "kernels/"); p; p = strstr(p + 1, "kernels/"))
        last = p;
    if (last)
        return last;
    const char *slash = strrchr(file, '/');
    return slash ? slash + 1 : file;
}

static const char *shuffle_name(int kind)
{
    static const char *const names[] = {"xor", "up", "down", "idx"};
    return kind >= 0 && kind < 4 ? names[kind] : "?";
}

static void block_fail(sim_runner *r, const char *fmt, ...) PSSM_PRINTF(2, 3);
static void block_fail(sim_runner *r, const char *fmt, ...)
{
    const pssm_sim_dim3 b = r->block;
    int len = snprintf(r->err, sizeof r->err, "sim: %s: block (%u,%u,%u): ", r->launch->name,
                       b.x, b.y, b.z);
    if (len < 0 || (size_t)len >= sizeof r->err)
        len = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + len, sizeof r->err - (size_t)len, fmt, ap);
    va_end(ap);
    r->failed = 1;
}

/* ---------------------------------------------------------------- runners and fibers */

static uint64_t sim_thread_id(void)
{
    static atomic_uint_fast64_t next = 1;
    static _Thread_local uint64_t id;
    if (id == 0)
        id = atomic_fetch_add(&next, 1);
    return id;
}

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static sim_runner *pool;

static sim_runner *runner_acquire(void)
{
    const uint64_t me = sim_thread_id();
    pthread_mutex_lock(&pool_lock);
    sim_runner **pick = NULL;
    for (sim_runner **p = &pool; *p; p = &(*p)->next_free)
        if (!pick || (*p)->owner == me)
            pick = p;
    sim_runner *r = NULL;
    if (pick) {
        r = *pick;
        *pick = r->next_free;
    }
    pthread_mutex_unlock(&pool_lock);
    if (!r) {
        r = aligned_alloc(_Alignof(sim_runner), sizeof *r);
        if (!r)
            return NULL;
        memset(r, 0, sizeof *r);
        r->owner = me;
    }
    if (r->owner != me) {
        for (int i = 0; i < r->nfibers; i++)
            r->fibers[i]->fresh = 1;
        r->owner = me;
    }
    r->next_free = NULL;
    return r;
}

static void runner_release(sim_runner *r)
{
    pthread_mutex_lock(&pool_lock);
    r->next_free = pool;
    pool = r;
    pthread_mutex_unlock(&pool_lock);
}

static void fiber_destroy(sim_fiber *f)
{
#if defined(SIM_VALGRIND)
    VALGRIND_STACK_DEREGISTER(f->vg_stack);
#endif
    munmap(f->map, f->map_bytes);
    free(f->copies);
    free(f);
}

/* At unload (dlclose) or exit: no fiber runs then. */
__attribute__((destructor)) static void pool_destroy(void)
{
    pthread_mutex_lock(&pool_lock);
    while (pool) {
        sim_runner *r = pool;
        pool = r->next_free;
        for (int i = 0; i < r->nfibers; i++)
            fiber_destroy(r->fibers[i]);
        free(r);
    }
    pthread_mutex_unlock(&pool_lock);
}

static sim_fiber *fiber_new(sim_runner *r)
{
    sim_fiber *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    f->map_bytes = SIM_STACK_BYTES + page;
    void *m = mmap(NULL, f->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        free(f);
        return NULL;
    }
    f->map = m;
    mprotect(f->map, page, PROT_NONE); /* an overflow faults instead of corrupting a neighbour */
#if defined(SIM_VALGRIND)
    f->vg_stack = VALGRIND_STACK_REGISTER(f->map + page, f->map + f->map_bytes);
#endif
    f->r = r;
    f->fresh = 1;
    return f;
}

static sim_fiber *self(void) { return (sim_fiber *)pssm_sim_self; }

/* The calling fiber waits at a collective (or, F_DONE, parks after its kernel) until the
 * scheduler resumes it.  Out of line, so no caller keeps values across the _setjmp. */
__attribute__((noinline)) static void fiber_wait(sim_fiber *f, int state, const char *file,
                                                 int line)
{
    f->state = state;
    f->file = file;
    f->line = line;
    if (state == F_DONE)
        f->in_kernel = 0;
    if (_setjmp(f->jb) == 0)
        _longjmp(f->r->sched, 1);
}

/* Entered once per stack; between kernels it parks in fiber_wait, and the next block (or
 * launch) resumes it there. */
static void fiber_main(void)
{
    for (;;) {
        const pssm_sim_launch *l = self()->r->launch;
        l->fn(l->params);
        pssm_sim_copy_wait(-1); /* (a GPU lands them too, however late) */
        fiber_wait(self(), F_DONE, NULL, 0);
    }
}

/* Runs f until it waits, finishes or fails.  Kept out of line: the _setjmp frame must not be
 * run_block's, whose loop variables change between switches. */
__attribute__((noinline)) static void resume(sim_runner *r, sim_fiber *f)
{
    pssm_sim_self = &f->t;
    f->in_kernel = 1;
    if (_setjmp(r->sched) != 0)
        return;
    if (f->fresh) {
        f->fresh = 0;
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        if (getcontext(&f->uc) == 0) {
            f->uc.uc_stack.ss_sp = f->map + page;
            f->uc.uc_stack.ss_size = f->map_bytes - page;
            f->uc.uc_link = NULL;
            makecontext(&f->uc, fiber_main, 0);
            setcontext(&f->uc); /* returns only on failure */
        }
        f->fresh = 1;
        block_fail(r, "cannot start the fiber of thread %d", f->tid);
        return;
    }
    _longjmp(f->jb, 1);
}

/* The calling fiber gives up; the block is abandoned (r->err is set). */
static _Noreturn void fiber_abort(sim_fiber *f) { _longjmp(f->r->sched, 1); }

/* ---------------------------------------------------------------- the dialect's calls */

uint32_t pssm_sim_shfl(int kind, uint32_t value, int arg, const char *file, int line)
{
    sim_fiber *f = self();
    f->kind = kind;
    f->value = value;
    f->arg = arg;
    fiber_wait(f, F_SHUFFLE, file, line);
    return f->result;
}

void pssm_sim_barrier(const char *file, int line) { fiber_wait(self(), F_BARRIER, file, line); }

static int same_site(const char *fa, int la, const char *fb, int lb)
{
    return la == lb && (fa == fb || strcmp(fa, fb) == 0);
}

void *pssm_sim_shared(size_t bytes, size_t align, const char *file, int line)
{
    sim_fiber *f = self();
    sim_runner *r = f->r;
    const int k = f->nshared++;
    if (k < r->nslots) { /* another thread declared it first: it must be the same array */
        const sim_slot *s = &r->slots[k];
        if (s->bytes != bytes || !same_site(s->file, s->line, file, line)) {
            block_fail(r,
                       "thread %d: shared declaration #%d at %s:%d (%zu bytes) differs from "
                       "the one other threads reached, at %s:%d (%zu bytes)",
                       f->tid, k + 1, short_path(file), line, bytes, short_path(s->file),
                       s->line, s->bytes);
            fiber_abort(f);
        }
        return r->arena + s->offset;
    }
    if (k >= SIM_MAX_SLOTS) {
        block_fail(r, "more than %d shared declarations (the last at %s:%d)", SIM_MAX_SLOTS,
                   short_path(file), line);
        fiber_abort(f);
    }
    if (align < SIM_SHARED_ALIGN || (align & (align - 1)) != 0)
        align = SIM_SHARED_ALIGN;
    if (bytes > SIM_SHARED_BYTES - r->declared) {
        block_fail(r,
                   "shared declaration at %s:%d (%zu bytes) takes the block past %d bytes, "
                   "the static shared memory a CUDA block may declare",
                   short_path(file), line, bytes, SIM_SHARED_BYTES);
        fiber_abort(f);
    }
    const size_t limit = r->launch->shared_limit;
    if (bytes > limit - r->dyn_bytes - r->declared) { /* (the launch checked dyn <= limit) */
        block_fail(r,
                   "shared declaration at %s:%d (%zu bytes) takes the block past the device's "
                   "%zu bytes of shared memory (%zu static before it, %zu dynamic)",
                   short_path(file), line, bytes, limit, r->declared, r->dyn_bytes);
        fiber_abort(f);
    }
    const size_t offset = (r->arena_used + SIM_REDZONE + align - 1) & ~(align - 1);
    r->slots[k] = (sim_slot){bytes, offset, file, line};
    r->nslots = k + 1;
    r->declared += bytes;
    memset(r->arena + r->arena_used, SIM_CANARY, offset - r->arena_used);
    memset(r->arena + offset, 0xff, bytes); /* NaN: a read before any write shows */
    memset(r->arena + offset + bytes, SIM_CANARY, SIM_REDZONE);
    r->arena_used = offset + bytes;
    return r->arena + offset;
}

void pssm_sim_copy16(void *dst, const void *src)
{
    sim_fiber *f = self();
    unsigned char bytes[16] = {0};
    if (src)
        memcpy(bytes, src, 16);
    if (!f->r->launch->defer_copies) {
        memcpy(dst, bytes, 16);
        return;
    }
    if (f->ncopies == f->copies_cap) {
        const int cap = f->copies_cap ? 2 * f->copies_cap : 64;
        sim_copy *c = realloc(f->copies, (size_t)cap * sizeof *c);
        if (!c) { /* no room to hold it back: land it now, as an undeferred launch would */
            memcpy(dst, bytes, 16);
            return;
        }
        f->copies = c;
        f->copies_cap = cap;
    }
    sim_copy *c = &f->copies[f->ncopies++];
    c->dst = dst;
    memcpy(c->bytes, bytes, 16);
    c->group = f->commits;
}

void pssm_sim_copy_commit(void) { self()->commits++; }

void pssm_sim_copy_wait(int n)
{
    sim_fiber *f = self();
    /* what may stay in flight: the n newest committed groups and the copies not committed
     * yet (cp.async.wait_group n); n = -1 lands every copy (cp.async.wait_all) */
    int kept = 0;
    for (int i = 0; i < f->ncopies; i++) {
        sim_copy *c = &f->copies[i];
        if (n < 0 || c->group < f->commits - n)
            memcpy(c->dst, c->bytes, 16);
        else
            f->copies[kept++] = *c;
    }
    f->ncopies = kept;
}

void *pssm_sim_dynamic_shared(const char *file, int line)
{
    sim_runner *r = self()->r;
    if (!r->dyn_file) { /* the site, for the red zones' messages */
        r->dyn_file = file;
        r->dyn_line = line;
    }
    return r->arena + r->dyn_offset; /* (none given: a write lands in the red zone) */
}

/* The first byte of [lo, hi) that is not the canary, or hi. */
static size_t first_struck(const sim_runner *r, size_t lo, size_t hi)
{
    while (lo < hi && r->arena[lo] == SIM_CANARY)
        lo++;
    return lo;
}

/* Fails the block if a write landed in a red zone; returns non-zero then. */
static int check_redzones(sim_runner *r)
{
    const size_t end = r->dyn_offset + r->dyn_bytes;
    size_t i = first_struck(r, 0, r->dyn_offset);
    const char *before = i < r->dyn_offset ? "before its start" : NULL;
    if (!before)
        i = first_struck(r, end, end + SIM_REDZONE);
    if ((before || i < end + SIM_REDZONE) && !r->dyn_file) {
        block_fail(r, "a write into the red zone of the dynamic shared memory, which the kernel "
                      "never named: a stray index");
        return 1;
    }
    if (before || i < end + SIM_REDZONE) {
        block_fail(r,
                   "dynamic shared memory declared at %s:%d (%zu bytes): a write %s (byte %+lld "
                   "from it)",
                   short_path(r->dyn_file), r->dyn_line, r->dyn_bytes,
                   before ? before : "past its end",
                   before ? (long long)i - (long long)r->dyn_offset : (long long)(i - end));
        return 1;
    }
    size_t lo = end + SIM_REDZONE;
    for (int k = 0; k <= r->nslots; k++) {
        const size_t hi = k < r->nslots ? r->slots[k].offset : r->arena_used + SIM_REDZONE;
        if (k == r->nslots && r->nslots == 0)
            return 0;
        for (size_t i = lo; i < hi; i++) {
            if (r->arena[i] == SIM_CANARY)
                continue;
            /* name the array whose end (or, for the first, whose start) was overrun */
            const sim_slot *s = &r->slots[k > 0 ? k - 1 : 0];
            const long long rel = (long long)i - (long long)(s->offset + (k > 0 ? s->bytes : 0));
            block_fail(r,
                       "shared array #%d declared at %s:%d (%zu bytes): a write %s it "
                       "(byte %+lld%s)",
                       k > 0 ? k : 1, short_path(s->file), s->line, s->bytes,
                       k > 0 ? "past the end of" : "before the start of", rel,
                       k > 0 ? " after its end" : " before its start");
            return 1;
        }
        if (k < r->nslots)
            lo = r->slots[k].offset + r->slots[k].bytes;
    }
    return 0;
}

/* ---------------------------------------------------------------- collectives */

/* CUDA __shfl_*_sync at width = the warp: the lane to read, or the caller's own lane. */
static int shuffle_source(int kind, int lane, int arg, int warp)
{
    switch (kind) {
    case PSSM_SIM_XOR: {
        const int src = lane ^ arg;
        return src >= 0 && src < warp ? src : lane;
    }
    case PSSM_SIM_UP: /* the distance is unsigned on CUDA */
        return (unsigned)arg <= (unsigned)lane ? lane - arg : lane;
    case PSSM_SIM_DOWN:
        return (uint64_t)(unsigned)arg + (uint64_t)lane < (uint64_t)warp ? lane + arg : lane;
    default: /* idx: the source lane modulo the (power of two) width, also when negative */
        return arg & (warp - 1);
    }
}

static int same_shuffle(const sim_fiber *a, const sim_fiber *b)
{
    return b->state == F_SHUFFLE && a->kind == b->kind &&
           same_site(a->file, a->line, b->file, b->line);
}

/* Lanes [lo, lo+m) of one warp all wait at one shuffle: exchange and make them ready. */
static void exchange(sim_runner *r, int lo, int m)
{
    sim_fiber **lane = r->fibers + lo;
    for (int l = 0; l < m; l++) {
        const int src = shuffle_source(lane[l]->kind, l, lane[l]->arg, r->launch->warp);
        lane[l]->result = src < m ? lane[src]->value : lane[l]->value; /* missing lane: own */
    }
    for (int l = 0; l < m; l++)
        lane[l]->state = F_READY;
}

/* Completes what can complete; returns whether any fiber became ready. */
static int complete_collectives(sim_runner *r)
{
    const int n = r->nthreads, warp = r->launch->warp;
    int progress = 0;
    for (int lo = 0; lo < n; lo += warp) {
        const int m = n - lo < warp ? n - lo : warp;
        const sim_fiber *first = r->fibers[lo];
        if (first->state != F_SHUFFLE)
            continue;
        int l = 1;
        while (l < m && same_shuffle(first, r->fibers[lo + l]))
            l++;
        if (l == m) {
            exchange(r, lo, m);
            progress = 1;
        }
    }
    if (progress)
        return 1;
    const sim_fiber *first = r->fibers[0];
    if (first->state != F_BARRIER)
        return 0;
    for (int t = 1; t < n; t++) {
        const sim_fiber *f = r->fibers[t];
        if (f->state != F_BARRIER || !same_site(first->file, first->line, f->file, f->line))
            return 0;
    }
    for (int t = 0; t < n; t++)
        r->fibers[t]->state = F_READY;
    return 1;
}

static void describe_thread(const sim_fiber *f, char *buf, size_t cap)
{
    snprintf(buf, cap, "thread %d (%u,%u,%u)", f->tid, f->t.thread.x, f->t.thread.y,
             f->t.thread.z);
}

/* Nothing is ready and nothing can complete: say why, warp problems first (the narrower). */
static void diagnose_stuck(sim_runner *r)
{
    const int n = r->nthreads, warp = r->launch->warp;
    for (int lo = 0; lo < n; lo += warp) {
        const int m = n - lo < warp ? n - lo : warp;
        const sim_fiber *first = NULL, *other = NULL, *barrier = NULL;
        int waiting = 0;
        for (int l = 0; l < m; l++) {
            const sim_fiber *f = r->fibers[lo + l];
            if (f->state == F_SHUFFLE) {
                waiting++;
                if (!first)
                    first = f;
                else if (!other && !same_shuffle(first, f))
                    other = f;
            } else if (f->state == F_BARRIER && !barrier)
                barrier = f;
        }
        if (!first)
            continue;
        const int w = lo / warp;
        if (other) {
            block_fail(r, "warp %d: lanes at different shuffles: lane %d at %s %s:%d, lane %d at "
                          "%s %s:%d",
                       w, first->tid - lo, shuffle_name(first->kind), short_path(first->file),
                       first->line, other->tid - lo, shuffle_name(other->kind),
                       short_path(other->file), other->line);
        } else if (barrier) {
            block_fail(r, "warp %d: shuffle (%s) at %s:%d reached by %d of %d lanes (lane %d "
                          "waits at the barrier at %s:%d)",
                       w, shuffle_name(first->kind), short_path(first->file), first->line,
                       waiting, m, barrier->tid - lo, short_path(barrier->file), barrier->line);
        } else {
            block_fail(r, "warp %d: shuffle (%s) at %s:%d reached by %d of %d lanes (the others "
                          "finished)",
                       w, shuffle_name(first->kind), short_path(first->file), first->line,
                       waiting, m);
        }
        return;
    }
    const sim_fiber *first = NULL, *other = NULL;
    int waiting = 0;
    for (int t = 0; t < n; t++) {
        const sim_fiber *f = r->fibers[t];
        if (f->state != F_BARRIER)
            continue;
        waiting++;
        if (!first)
            first = f;
        else if (!other && !same_site(first->file, first->line, f->file, f->line))
            other = f;
    }
    char a[64], b[64];
    if (other) {
        describe_thread(first, a, sizeof a);
        describe_thread(other, b, sizeof b);
        block_fail(r, "threads at different barriers: %s at %s:%d, %s at %s:%d", a,
                   short_path(first->file), first->line, b, short_path(other->file), other->line);
    } else if (first) {
        block_fail(r, "barrier at %s:%d reached by %d of %d threads (the others finished)",
                   short_path(first->file), first->line, waiting, n);
    } else {
        block_fail(r, "internal: the block stopped with no thread waiting");
    }
}

/* ---------------------------------------------------------------- blocks and launches */

static portssm_status run_block(sim_runner *r, pssm_sim_dim3 block)
{
    const pssm_sim_launch *l = r->launch;
    const int n = (int)(l->block.x * l->block.y * l->block.z);
    while (r->nfibers < n) {
        sim_fiber *f = fiber_new(r);
        if (!f) {
            snprintf(r->err, sizeof r->err,
                     "sim: %s: cannot map a %d KiB stack for GPU thread %d of a block",
                     l->name, SIM_STACK_BYTES / 1024, r->nfibers);
            return PORTSSM_ERR_OUT_OF_MEMORY;
        }
        r->fibers[r->nfibers++] = f;
    }
    r->block = block;
    r->nthreads = n;
    r->nslots = 0;
    r->arena_used = 0;
    r->declared = 0;
    r->failed = 0;
    /* the dynamic shared memory, even of 0 bytes: red zone, the memory (NaN until written),
     * red zone; the static arrays follow */
    r->dyn_bytes = l->dynamic_shared;
    r->dyn_offset = SIM_REDZONE; /* (a multiple of SIM_SHARED_ALIGN) */
    r->dyn_file = NULL;
    r->dyn_line = 0;
    memset(r->arena, SIM_CANARY, r->dyn_offset);
    memset(r->arena + r->dyn_offset, 0xff, r->dyn_bytes);
    memset(r->arena + r->dyn_offset + r->dyn_bytes, SIM_CANARY, SIM_REDZONE);
    r->arena_used = r->dyn_offset + r->dyn_bytes + SIM_REDZONE; /* (the next red zone: its own) */
    for (int t = 0; t < n; t++) {
        sim_fiber *f = r->fibers[t];
        f->t.thread.x = (uint32_t)t % l->block.x;
        f->t.thread.y = (uint32_t)t / l->block.x % l->block.y;
        f->t.thread.z = (uint32_t)t / (l->block.x * l->block.y);
        f->t.block = block;
        f->t.block_dim = l->block;
        f->t.grid_dim = l->grid;
        f->tid = t;
        f->state = F_READY;
        f->nshared = 0;
        f->ncopies = 0;
        f->commits = 0;
    }
    for (;;) {
        for (int t = 0; t < n; t++) {
            sim_fiber *f = r->fibers[t];
            if (f->state != F_READY)
                continue;
            resume(r, f);
            if (r->failed)
                goto abandon;
        }
        if (check_redzones(r))
            goto abandon;
        if (complete_collectives(r))
            continue;
        int done = 0;
        while (done < n && r->fibers[done]->state == F_DONE)
            done++;
        if (done == n)
            return PORTSSM_OK;
        diagnose_stuck(r);
        goto abandon;
    }
abandon: /* stacks of fibers stopped inside the kernel are reused from scratch */
    pssm_sim_self = NULL;
    for (int t = 0; t < n; t++) {
        sim_fiber *f = r->fibers[t];
        if (f->in_kernel) {
            f->in_kernel = 0;
            f->fresh = 1;
        }
    }
    return PORTSSM_ERR_DEVICE;
}

typedef struct sim_job {
    const pssm_sim_launch *launch;
    uint64_t nblocks;
    atomic_uint_fast64_t next;
    atomic_uint_fast64_t first_failed; /* lowest failing block index, UINT64_MAX: none */
    pthread_mutex_t lock;
    portssm_status status;
    char err[PSSM_ERROR_CAPACITY];
} sim_job;

static void job_record(sim_job *j, uint64_t b, portssm_status s, const char *msg)
{
    pthread_mutex_lock(&j->lock);
    if (b < atomic_load(&j->first_failed)) {
        atomic_store(&j->first_failed, b);
        j->status = s;
        snprintf(j->err, sizeof j->err, "%s", msg);
    }
    pthread_mutex_unlock(&j->lock);
}

static void job_work(sim_job *j)
{
    sim_runner *r = runner_acquire();
    if (!r) {
        job_record(j, 0, PORTSSM_ERR_OUT_OF_MEMORY, "sim: out of memory for a block runner");
        return;
    }
    r->launch = j->launch;
    const pssm_sim_dim3 g = j->launch->grid;
    for (;;) {
        const uint64_t b = atomic_fetch_add(&j->next, 1);
        if (b >= j->nblocks || b > atomic_load(&j->first_failed))
            break;
        const pssm_sim_dim3 idx = {(uint32_t)(b % g.x), (uint32_t)(b / g.x % g.y),
                                   (uint32_t)(b / ((uint64_t)g.x * g.y))};
        const portssm_status s = run_block(r, idx);
        if (s != PORTSSM_OK) {
            job_record(j, b, s, r->err);
            break;
        }
    }
    pssm_sim_self = NULL;
    r->launch = NULL;
    runner_release(r);
}

static void *job_thread(void *arg)
{
    job_work(arg);
    return NULL;
}

static int host_threads;

static void host_threads_init(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    host_threads = n < 1 ? 1 : n > 4 ? 4 : (int)n;
    const char *e = getenv("PORTSSM_SIM_THREADS");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*end == '\0' && v >= 1 && v <= SIM_MAX_HOST_THREADS)
            host_threads = (int)v;
    }
}

int pssm_sim_host_threads(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, host_threads_init);
    return host_threads;
}

static portssm_status check_launch(const pssm_sim_launch *l, char *err, size_t cap)
{
    const pssm_sim_dim3 g = l->grid, b = l->block;
    const uint64_t threads = (uint64_t)b.x * b.y * b.z;
    const char *why = NULL;
    if (l->warp != 32 && l->warp != 64)
        why = "the warp width is not 32 or 64";
    else if (!l->fn)
        why = "the kernel is not built for the sim";
    else if (g.x == 0 || g.y == 0 || g.z == 0 || b.x == 0 || b.y == 0 || b.z == 0)
        why = "a grid or block dimension is 0";
    else if (g.x > INT32_MAX || g.y > 65535 || g.z > 65535)
        why = "the grid exceeds (2^31-1, 65535, 65535)";
    else if (b.x > 1024 || b.y > 1024 || b.z > 64 || threads > SIM_MAX_THREADS)
        why = "the block exceeds (1024, 1024, 64) or 1024 threads";
    else if (l->shared_limit > PSSM_SIM_SHARED_MAX || l->dynamic_shared > l->shared_limit ||
             l->dynamic_shared % SIM_SHARED_ALIGN != 0)
        why = "the dynamic shared memory is past the device's shared memory or not a multiple "
              "of 16 bytes";
    if (!why)
        return PORTSSM_OK;
    snprintf(err, cap, "sim: %s: bad launch, grid (%u,%u,%u) block (%u,%u,%u): %s",
             l->name ? l->name : "?", g.x, g.y, g.z, b.x, b.y, b.z, why);
    return PORTSSM_ERR_INTERNAL;
}

portssm_status pssm_sim_run(const pssm_sim_launch *l, char *err, size_t err_capacity)
{
    portssm_status s = check_launch(l, err, err_capacity);
    if (s != PORTSSM_OK)
        return s;
    sim_job j;
    memset(&j, 0, sizeof j);
    j.launch = l;
    j.nblocks = (uint64_t)l->grid.x * l->grid.y * l->grid.z;
    atomic_init(&j.next, 0);
    atomic_init(&j.first_failed, UINT64_MAX);
    pthread_mutex_init(&j.lock, NULL);
    j.status = PORTSSM_OK;

    /* A small launch runs on the calling thread: starting threads would cost more than it saves. */
    uint64_t workers = (uint64_t)pssm_sim_host_threads();
    if (j.nblocks * l->block.x * l->block.y * l->block.z < SIM_SPREAD_MIN_THREADS)
        workers = 1;
    if (workers > j.nblocks)
        workers = j.nblocks;
    pthread_t tids[SIM_MAX_HOST_THREADS];
    int spawned = 0;
    for (uint64_t k = 1; k < workers; k++) /* fewer threads if one cannot start: still correct */
        if (pthread_create(&tids[spawned], NULL, job_thread, &j) == 0)
            spawned++;
    job_work(&j);
    for (int k = 0; k < spawned; k++)
        pthread_join(tids[k], NULL);
    pthread_mutex_destroy(&j.lock);
    if (j.status != PORTSSM_OK)
        snprintf(err, err_capacity, "%s", j.err);
    return j.status;
}
