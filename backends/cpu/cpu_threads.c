/* cpu_threads.c - see cpu_threads.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "cpu_threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__)
#include <sched.h>
#endif

/* The CPUs this process may run on. */
static int usable_cpus(void)
{
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n >= 1)
            return n;
    }
#endif
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > PSSM_CPU_MAX_THREADS ? PSSM_CPU_MAX_THREADS : (int)n;
}

int pssm_cpu_num_threads(void)
{
    const char *e = getenv("PORTSSM_NUM_THREADS");
    if (e && *e) {
        char *end;
        const long v = strtol(e, &end, 10);
        if (*end == '\0' && v >= 1) /* anything else (0, negative, not a number): the default */
            return v > PSSM_CPU_MAX_THREADS ? PSSM_CPU_MAX_THREADS : (int)v;
    }
    const int n = usable_cpus();
    return n > PSSM_CPU_MAX_THREADS ? PSSM_CPU_MAX_THREADS : n;
}

int pssm_cpu_threads_for(int64_t units, double cost)
{
    if (units <= 1 || cost < PSSM_CPU_SPREAD_MIN)
        return 1;
    const int n = pssm_cpu_num_threads();
    return units < n ? (int)units : n;
}

typedef struct job {
    int64_t units;
    pssm_cpu_unit_fn unit;
    pssm_cpu_commit_fn commit;
    void *arg;
    atomic_int_fast64_t next_free; /* without commits: the next unit to hand out */
    /* with commits, under lock: */
    int64_t next;                  /* the next unit to hand out                  */
    int64_t committed;             /* units committed so far                     */
    int ring;
    unsigned char done[2 * PSSM_CPU_MAX_THREADS]; /* per part slot: its unit is done */
    pthread_mutex_t lock;
    pthread_cond_t turn;
} job;

typedef struct worker {
    job *j;
    int slot;
} worker;

/* The next unit for a thread (units: none left), waiting while its part slot still holds an
 * uncommitted unit.  Units are handed out in order, so every unit before it is held by a
 * running thread, which finishes and commits without waiting: the wait ends. */
static int64_t take(job *j)
{
    if (!j->commit)
        return atomic_fetch_add(&j->next_free, 1);
    pthread_mutex_lock(&j->lock);
    const int64_t u = j->next < j->units ? j->next++ : j->units;
    while (u < j->units && u - j->committed >= j->ring)
        pthread_cond_wait(&j->turn, &j->lock);
    pthread_mutex_unlock(&j->lock);
    return u;
}

/* Unit u is done: commits it and every later unit already done, in order. */
static void finish(job *j, int64_t u)
{
    pthread_mutex_lock(&j->lock);
    j->done[u % j->ring] = 1;
    while (j->committed < j->units && j->done[j->committed % j->ring]) {
        const int part = (int)(j->committed % j->ring);
        j->done[part] = 0;
        j->commit(j->arg, j->committed, part);
        j->committed++;
    }
    pthread_cond_broadcast(&j->turn);
    pthread_mutex_unlock(&j->lock);
}

static void work(job *j, int slot)
{
    for (;;) {
        const int64_t u = take(j);
        if (u >= j->units)
            return;
        j->unit(j->arg, u, slot, (int)(u % j->ring));
        if (j->commit)
            finish(j, u);
    }
}

static void *thread_main(void *p)
{
    worker *w = p;
    work(w->j, w->slot);
    return NULL;
}

void pssm_cpu_parallel(int64_t units, int threads, pssm_cpu_unit_fn unit,
                       pssm_cpu_commit_fn commit, void *arg)
{
    if (threads <= 1 || units <= 1) { /* the serial loop: the same units, commits, order */
        for (int64_t u = 0; u < units; u++) {
            unit(arg, u, 0, (int)(u % PSSM_CPU_RING(1)));
            if (commit)
                commit(arg, u, (int)(u % PSSM_CPU_RING(1)));
        }
        return;
    }
    if (threads > PSSM_CPU_MAX_THREADS)
        threads = PSSM_CPU_MAX_THREADS;
    job j;
    memset(&j, 0, sizeof j);
    j.units = units;
    j.unit = unit;
    j.commit = commit;
    j.arg = arg;
    j.ring = PSSM_CPU_RING(threads);
    atomic_init(&j.next_free, 0);
    pthread_mutex_init(&j.lock, NULL);
    pthread_cond_init(&j.turn, NULL);
    pthread_t tids[PSSM_CPU_MAX_THREADS];
    worker ws[PSSM_CPU_MAX_THREADS];
    int started = 0;
    for (int k = 1; k < threads; k++) { /* fewer threads if one cannot start: same results */
        ws[started] = (worker){&j, started + 1};
        if (pthread_create(&tids[started], NULL, thread_main, &ws[started]) == 0)
            started++;
    }
    work(&j, 0);
    for (int k = 0; k < started; k++)
        pthread_join(tids[k], NULL);
    pthread_cond_destroy(&j.turn);
    pthread_mutex_destroy(&j.lock);
}
