/*
 * progress.c - calls in flight: the requests of baton.h (baton_wait,
 * baton_wait_for, baton_test, baton_wait_all) and the progress engine that runs them.
 *
 * The engine is made by a communicator's first i-call: a lock, two
 * condition variables and a thread. Calls run one at a time, each to its
 * end, in the order they were issued (the live list of call.c): whoever
 * finds the next one waiting and nobody running, the progress thread or a
 * caller blocked in baton_wait, takes it and runs it. So the thread runs
 * calls while the caller computes, a waiting caller never waits on a
 * sleeping thread, and a program that only makes blocking calls never has
 * an engine at all: its calls run in the caller, with no lock taken.
 *
 * The thread sleeps on its condition variable while there is nothing to
 * run, and inside a call it waits on sockets and futexes as a blocking
 * call does (the transports spin briefly, then block), so it burns no core
 * while nothing arrives. It blocks every signal, so that the program's
 * handlers run in its own threads.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "comm.h"
#include "p2p.h"

struct baton__engine {
  pthread_mutex_t mu;
  pthread_cond_t work; /* the thread waits here for a call to run */
  pthread_cond_t done; /* callers wait here for a call to complete */
  pthread_t thread;
  int running; /* a call is being run, by the thread or a waiter */
  int stop;
};

void baton__progress_lock(baton_comm_t *comm) {
  if (comm->engine)
    pthread_mutex_lock(&comm->engine->mu);
}

void baton__progress_unlock(baton_comm_t *comm) {
  if (comm->engine)
    pthread_mutex_unlock(&comm->engine->mu);
}

/* The oldest call not yet run, NULL when none; under the lock. */
static baton__call_t *next_call(baton_comm_t *comm) {
  for (baton__call_t *c = comm->live_first; c; c = c->next_live)
    if (c->state == BATON__CALL_ISSUED)
      return c;
  return NULL;
}

/* Runs call c to its end without the lock, then marks it done; under the
 * lock, which it releases meanwhile. */
static void run_locked(baton__engine_t *e, baton__call_t *c) {
  c->state = BATON__CALL_RUNNING;
  e->running = 1;
  pthread_mutex_unlock(&e->mu);
  baton__exec(c);
  pthread_mutex_lock(&e->mu);
  c->state = BATON__CALL_DONE;
  e->running = 0;
  pthread_cond_broadcast(&e->done);
  pthread_cond_signal(&e->work); /* the next one, if the thread sleeps */
}

static void *thread_main(void *arg) {
  baton_comm_t *comm = arg;
  baton__engine_t *e = comm->engine;
  baton__log_rank = comm->rank;
  pthread_setname_np(pthread_self(), "baton-progress"); /* what top -H and perf show */
  pthread_mutex_lock(&e->mu);
  for (;;) {
    baton__call_t *c = NULL;
    while (!e->stop && (e->running || !(c = next_call(comm))))
      pthread_cond_wait(&e->work, &e->mu);
    if (e->stop)
      break;
    run_locked(e, c);
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
}

/* BATON_PROGRESS_CPU: pin the thread, or say why it could not be. */
static void pin(baton_comm_t *comm, pthread_t t) {
  int cpu = comm->params.progress_cpu;
  if (cpu < 0)
    return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  int rc = pthread_setaffinity_np(t, sizeof set, &set);
  if (rc)
    baton__log_warn(INIT, "BATON_PROGRESS_CPU=%d: cannot pin the progress thread: %s", cpu,
                    strerror(rc));
  else
    baton__log_info(INIT, "the progress thread runs on core %d", cpu);
}

/* The engine, made by the owner thread (the only one that can reach the
 * communicator before there is a request). */
static int start(baton_comm_t *comm) {
  baton__engine_t *e = calloc(1, sizeof *e);
  if (!e)
    return BATON_ENOMEM;
  pthread_mutex_init(&e->mu, NULL);
  pthread_condattr_t monotonic; /* baton_wait_for's deadlines are baton__now()'s */
  pthread_condattr_init(&monotonic);
  pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
  pthread_cond_init(&e->work, NULL);
  pthread_cond_init(&e->done, &monotonic);
  pthread_condattr_destroy(&monotonic);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  comm->engine = e;
  int rc = pthread_create(&e->thread, NULL, thread_main, comm);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) {
    comm->engine = NULL;
    pthread_cond_destroy(&e->done);
    pthread_cond_destroy(&e->work);
    pthread_mutex_destroy(&e->mu);
    free(e);
    return BATON_ESYS;
  }
  pin(comm, e->thread);
  baton__log_info(INIT, "progress thread started for the calls in flight");
  return BATON_OK;
}

/* Calls issued and not yet complete; under the lock. */
static int in_flight(const baton_comm_t *comm) {
  int n = 0;
  for (const baton__call_t *c = comm->live_first; c; c = c->next_live)
    n += c->state != BATON__CALL_DONE;
  return n;
}

/* Waits, under the lock, until c is done: running calls itself while
 * nobody else does. */
static void wait_locked(baton_comm_t *comm, baton__call_t *c) {
  baton__engine_t *e = comm->engine;
  while (c->state != BATON__CALL_DONE) {
    baton__call_t *next = e->running ? NULL : next_call(comm);
    if (next)
      run_locked(e, next);
    else
      pthread_cond_wait(&e->done, &e->mu);
  }
}

#define MOST_IN_FLIGHT 64

int baton__progress_post(baton__call_t *c) {
  baton_comm_t *comm = c->comm;
  int rc = comm->engine ? BATON_OK : start(comm);
  if (rc)
    return baton__fail(comm, rc, "%s: cannot start the progress thread", c->args.name);
  baton__engine_t *e = comm->engine;
  pthread_mutex_lock(&e->mu);
  /* Past the most in flight, the oldest must complete first. */
  while (in_flight(comm) > MOST_IN_FLIGHT) {
    baton__call_t *oldest = comm->live_first;
    while (oldest->state == BATON__CALL_DONE)
      oldest = oldest->next_live;
    wait_locked(comm, oldest);
  }
  pthread_cond_signal(&e->work);
  pthread_mutex_unlock(&e->mu);
  return BATON_OK;
}

int baton_wait(baton_request_t *c) {
  if (!c)
    return BATON_EINVAL;
  int done;
  if (c->kind == BATON__REQ_P2P)
    return baton__p2p_wait_until(c, INFINITY, &done);
  baton_comm_t *comm = c->comm;
  if (!comm->engine) { /* a blocking call: this thread runs it */
    baton__exec(c);
    return baton__call_finish(c);
  }
  pthread_mutex_lock(&comm->engine->mu);
  wait_locked(comm, c);
  int rc = baton__call_finish(c);
  pthread_mutex_unlock(&comm->engine->mu);
  return rc;
}

/* The clock `done` is waited on with (start): baton__now's. */
static struct timespec at(double t) {
  double whole = floor(t);
  return (struct timespec){(time_t)whole, (long)((t - whole) * 1e9)};
}

int baton_wait_for(baton_request_t *c, double timeout_s, int *done) {
  if (!c || !done || !(timeout_s >= 0))
    return BATON_EINVAL;
  double until = baton__now() + timeout_s;
  if (c->kind == BATON__REQ_P2P)
    return baton__p2p_wait_until(c, until, done);
  baton_comm_t *comm = c->comm;
  if (!comm->engine) { /* a blocking call's request: it runs here and now */
    *done = 1;
    return baton_wait(c);
  }
  baton__engine_t *e = comm->engine;
  struct timespec deadline = at(until);
  pthread_mutex_lock(&e->mu);
  /* The progress thread runs the calls (baton__progress_post woke it): a
   * call run here would run to its end, past the deadline. */
  while (c->state != BATON__CALL_DONE)
    if (pthread_cond_timedwait(&e->done, &e->mu, &deadline) == ETIMEDOUT)
      break;
  *done = c->state == BATON__CALL_DONE;
  int rc = *done ? baton__call_finish(c) : BATON_OK;
  pthread_mutex_unlock(&e->mu);
  return rc;
}

int baton_test(baton_request_t *c, int *done) {
  if (!c || !done)
    return BATON_EINVAL;
  if (c->kind == BATON__REQ_P2P)
    return baton__p2p_test(c, done);
  baton_comm_t *comm = c->comm;
  if (!comm->engine) {
    *done = 1;
    return baton_wait(c);
  }
  pthread_mutex_lock(&comm->engine->mu);
  int rc = BATON_OK;
  *done = c->state == BATON__CALL_DONE;
  if (*done)
    rc = baton__call_finish(c);
  pthread_mutex_unlock(&comm->engine->mu);
  return rc;
}

int baton_wait_all(int n, baton_request_t **reqs) {
  if (n < 0 || (n > 0 && !reqs))
    return BATON_EINVAL;
  int first = BATON_OK;
  for (int i = 0; i < n; i++) {
    int rc = reqs[i] ? baton_wait(reqs[i]) : BATON_OK;
    reqs[i] = NULL;
    if (rc && !first)
      first = rc;
  }
  return first;
}

int baton__progress_stop(baton_comm_t *comm) {
  baton__engine_t *e = comm->engine;
  if (!e)
    return 0;
  pthread_mutex_lock(&e->mu);
  int n = in_flight(comm);
  if (n) {
    /* The one running fails at its next wait; the others never start. */
    atomic_store_explicit(&comm->abort_requested, 1, memory_order_release);
    for (baton__call_t *c = comm->live_first; c; c = c->next_live)
      if (c->state == BATON__CALL_ISSUED)
        c->state = BATON__CALL_DONE, c->status = BATON_EABORTED;
    while (e->running)
      pthread_cond_wait(&e->done, &e->mu);
  }
  e->stop = 1;
  pthread_cond_broadcast(&e->work);
  pthread_mutex_unlock(&e->mu);
  pthread_join(e->thread, NULL);
  comm->engine = NULL;
  pthread_cond_destroy(&e->done);
  pthread_cond_destroy(&e->work);
  pthread_mutex_destroy(&e->mu);
  free(e);
  return n;
}
