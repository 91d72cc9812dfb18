/*
 * comm.c - creating and destroying a communicator.
 *
 * baton_comm_init reads the knobs, meets the other ranks through the store
 * that rank 0 serves at BATON_ADDR, checks that they share this host,
 * chooses the ring and sets up the shared-memory transport. Everything a
 * collective needs later (schedule, chunk layout, channels) is allocated
 * here, once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm.h"

static char init_error[BATON__ERRLEN];

const char *baton_last_init_error(void) { return init_error; }

int baton__fail(baton_comm_t *comm, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(comm->last_error, sizeof comm->last_error, fmt, ap);
  va_end(ap);
  BATON_WARN(COLL, "%s: %s", baton_err_name(rc), comm->last_error);
  return rc;
}

baton__conn_t *baton__conn_to(baton_comm_t *comm, int peer) {
  baton__conn_t *c = baton__shm_send_conn(comm->shm);
  return c->peer == peer ? c : NULL;
}

baton__conn_t *baton__conn_from(baton_comm_t *comm, int peer) {
  baton__conn_t *c = baton__shm_recv_conn(comm->shm);
  return c->peer == peer ? c : NULL;
}

/* Ranks share memory when they run under one kernel (boot id) in one
 * network namespace; the host name is there for people. */
static void host_identity(char *buf, size_t len) {
  char host[64] = "?", boot[40] = "?";
  gethostname(host, sizeof host - 1);
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof boot, f))
      strcpy(boot, "?");
    boot[strcspn(boot, "\n")] = '\0';
    fclose(f);
  }
  struct stat st;
  unsigned long netns = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long)st.st_ino : 0;
  snprintf(buf, len, "%s boot=%s netns=%lu", host, boot, netns);
}

static int check_one_host(baton_comm_t *c, char *err, size_t errlen) {
  char mine[160], theirs[160], key[32];
  host_identity(mine, sizeof mine);
  snprintf(key, sizeof key, "host.%d", c->rank);
  int rc = baton__store_set(c->store, key, mine, strlen(mine) + 1, err, errlen);
  for (int r = 0; r < c->size && rc == 0; r++) {
    size_t len = 0;
    snprintf(key, sizeof key, "host.%d", r);
    rc = baton__store_get(c->store, key, theirs, sizeof theirs - 1, &len,
                          c->params.timeout_s, err, errlen);
    theirs[len < sizeof theirs ? len : sizeof theirs - 1] = '\0';
    if (rc == 0 && strcmp(mine, theirs) != 0) {
      snprintf(err, errlen, "rank %d runs on \"%s\" but rank %d on \"%s\": this version "
               "of baton connects ranks through shared memory only, so all ranks "
               "must share one host", r, theirs, c->rank, mine);
      rc = BATON_EUSAGE;
    }
  }
  return rc;
}

static int read_identity(baton_comm_t *c, char *host, size_t hostlen, int *port,
                         char *err, size_t errlen) {
  int rc = baton__params_load(&c->params, err, errlen);
  if (rc)
    return rc;
  const char *missing = c->params.rank < 0   ? "BATON_RANK"
                        : c->params.size < 0 ? "BATON_SIZE"
                        : !c->params.addr[0] ? "BATON_ADDR"
                                             : NULL;
  if (missing) {
    snprintf(err, errlen, "%s is not set: start the program with baton-run, or set "
             "BATON_RANK, BATON_SIZE and BATON_ADDR", missing);
    return BATON_EUSAGE;
  }
  if (c->params.rank >= c->params.size) {
    snprintf(err, errlen, "BATON_RANK=%d is not below BATON_SIZE=%d", c->params.rank,
             c->params.size);
    return BATON_EUSAGE;
  }
  c->rank = c->params.rank;
  c->size = c->params.size;
  baton__log_rank = c->rank;
  return baton__parse_hostport(c->params.addr, "BATON_ADDR", host, hostlen, port, err, errlen);
}

static int alloc_tables(baton_comm_t *c, char *err, size_t errlen) {
  size_t n = (size_t)c->size;
  c->order = calloc(n, sizeof *c->order);
  c->sched.steps = calloc(2 * n, sizeof *c->sched.steps);
  c->in_off = calloc(n, sizeof(size_t));
  c->out_off = calloc(n, sizeof(size_t));
  c->len = calloc(n, sizeof(size_t));
  if (!c->order || !c->sched.steps || !c->in_off || !c->out_off || !c->len) {
    snprintf(err, errlen, "out of memory for the tables of %d ranks", c->size);
    return BATON_ENOMEM;
  }
  for (int r = 0; r < c->size; r++)
    c->order[r] = r;
  return 0;
}

static void free_comm(baton_comm_t *c) {
  baton__shm_destroy(c->shm);
  if (c->store)
    baton__store_close(c->store);
  if (c->server)
    baton__store_stop(c->server);
  free(c->order);
  free(c->sched.steps);
  free(c->in_off);
  free(c->out_off);
  free(c->len);
  free(c);
}

static void log_ready(const baton_comm_t *c) {
  char ring[256];
  size_t off = 0;
  for (int i = 0; i < c->size && off < sizeof ring - 16; i++)
    off += (size_t)snprintf(ring + off, sizeof ring - off, "%s%d", i ? " -> " : "", c->order[i]);
  BATON_INFO(INIT, "rank %d of %d ready: transport shm, segment %zu bytes, ring %s", c->rank,
             c->size, c->params.segment_bytes, ring);
}

/* The job's secret from BATON_SECRET; without one, rank 0 (which serves the
 * store) says once per process that anyone may connect. */
static int load_secret(baton_comm_t *c, const char *host, int port, char *err, size_t errlen) {
  static int warned;
  int rc = baton__secret_set(&c->secret, c->params.secret, err, errlen);
  if (rc == BATON_OK && c->secret.len == 0 && c->rank == 0 && !warned) {
    warned = 1;
    BATON_WARN(INIT, "BATON_SECRET is not set: the store at %s:%d accepts any process that "
               "connects; baton-run sets a secret for each job", host, port);
  }
  return rc;
}

int baton_comm_init(baton_comm_t **comm) {
  char *err = init_error, host[256];
  size_t errlen = sizeof init_error;
  int port, rc;
  err[0] = '\0';
  if (!comm) {
    snprintf(err, errlen, "baton_comm_init: comm is NULL");
    return BATON_EINVAL;
  }
  *comm = NULL;
  baton_comm_t *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return BATON_ENOMEM;
  }
  if ((rc = read_identity(c, host, sizeof host, &port, err, errlen)) != 0)
    goto fail;
  if ((rc = load_secret(c, host, port, err, errlen)) != 0)
    goto fail;
  if (c->rank == 0 && (rc = baton__store_serve(host, port, &c->secret, c->params.timeout_s,
                                               &c->server, err, errlen)) != 0)
    goto fail;
  if ((rc = baton__store_connect(host, port, c->params.timeout_s, &c->secret, &c->store, err,
                                 errlen)) != 0)
    goto fail;
  if ((rc = check_one_host(c, err, errlen)) != 0 || (rc = alloc_tables(c, err, errlen)) != 0)
    goto fail;
  if (c->size > 1 &&
      (rc = baton__shm_setup(c->store, c->rank, c->size, c->order, &c->params, &c->shm, err,
                             errlen)) != 0)
    goto fail;
  c->shm_calls = 1; /* the set-up rendezvous */
  log_ready(c);
  *comm = c;
  return BATON_OK;
fail:
  BATON_WARN(INIT, "baton_comm_init failed: %s: %s", baton_err_name(rc), err);
  free_comm(c);
  return rc;
}

int baton_comm_destroy(baton_comm_t *comm) {
  if (!comm)
    return BATON_OK;
  int rc = BATON_OK;
  /* Nobody may be mid-collective when rank 0 stops the store. */
  if (comm->shm)
    rc = baton_barrier(comm);
  free_comm(comm);
  return rc;
}

int baton_comm_rank(const baton_comm_t *comm) { return comm ? comm->rank : -1; }
int baton_comm_size(const baton_comm_t *comm) { return comm ? comm->size : -1; }

const char *baton_comm_last_error(const baton_comm_t *comm) {
  return comm ? comm->last_error : "comm is NULL";
}
