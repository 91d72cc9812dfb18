/*
 * comm.c - creating and destroying a communicator.
 *
 * baton_comm_init reads the knobs, meets the other ranks through the store
 * that rank 0 serves at BATON_ADDR, learns which ranks share a host,
 * chooses a ring that visits each host's ranks together and connects the
 * ring: shared memory inside a host, TCP between hosts. Everything a
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
  return peer >= 0 && peer < comm->size ? comm->to[peer] : NULL;
}

baton__conn_t *baton__conn_from(baton_comm_t *comm, int peer) {
  return peer >= 0 && peer < comm->size ? comm->from[peer] : NULL;
}

/* Ranks share memory when they run under one kernel (boot id) in one
 * network namespace, unless BATON_HOSTID says otherwise. */
static void host_identity(const baton__params_t *p, char *buf, size_t len) {
  char host[64] = "?", boot[40] = "?";
  gethostname(host, sizeof host - 1);
  if (p->hostid[0]) {
    snprintf(buf, len, "%.60s\n%.60s", p->hostid, p->hostid);
    return;
  }
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof boot, f))
      strcpy(boot, "?");
    boot[strcspn(boot, "\n")] = '\0';
    fclose(f);
  }
  struct stat st;
  unsigned long netns = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long)st.st_ino : 0;
  /* The part after the newline is what people see. */
  snprintf(buf, len, "boot=%s netns=%lu\n%s", boot, netns, host);
}

/* Publishes this rank's identity and reads everyone's: group[r] is the
 * lowest rank that shares memory with r, hosts[r] a readable name (the host
 * name, with the group when several groups share a host name). */
static int learn_hosts(baton_comm_t *c, char *err, size_t errlen) {
  char (*ids)[160] = calloc((size_t)c->size, sizeof *ids);
  char key[32];
  int rc = ids ? 0 : BATON_ENOMEM;
  if (rc == 0) {
    host_identity(&c->params, ids[c->rank], sizeof ids[0]);
    snprintf(key, sizeof key, "host.%d", c->rank);
    rc = baton__store_set(c->store, key, ids[c->rank], strlen(ids[c->rank]) + 1, err, errlen);
  }
  for (int r = 0; r < c->size && rc == 0; r++) {
    size_t len = 0;
    snprintf(key, sizeof key, "host.%d", r);
    rc = baton__store_get(c->store, key, ids[r], sizeof ids[r] - 1, &len, c->params.timeout_s,
                          err, errlen);
    ids[r][len < sizeof ids[r] ? len : sizeof ids[r] - 1] = '\0';
  }
  for (int r = 0; r < c->size && rc == 0; r++) {
    const char *name = strchr(ids[r], '\n');
    snprintf(c->hosts[r], sizeof c->hosts[r], "%s", name ? name + 1 : ids[r]);
    c->group[r] = r;
    for (int q = 0; q < r; q++)
      if (strcmp(ids[q], ids[r]) == 0) {
        c->group[r] = c->group[q];
        break;
      }
  }
  for (int r = 0; r < c->size && rc == 0; r++)
    for (int q = 0; q < c->size; q++)
      if (c->group[q] != c->group[r] && strcmp(c->hosts[q], c->hosts[r]) == 0) {
        char g[16];
        snprintf(g, sizeof g, "#%d", c->group[r]);
        size_t l = strlen(c->hosts[r]);
        snprintf(c->hosts[r] + (l < 48 ? l : 48), 16, "%s", g);
        break;
      }
  if (rc == BATON_ENOMEM)
    snprintf(err, errlen, "out of memory");
  free(ids);
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
  if (strcmp(c->params.transport, "auto") != 0 && strcmp(c->params.transport, "tcp") != 0) {
    snprintf(err, errlen, "BATON_TRANSPORT=\"%s\" is neither \"auto\" nor \"tcp\"",
             c->params.transport);
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
  c->hosts = calloc(n, sizeof *c->hosts);
  c->group = calloc(n, sizeof *c->group);
  c->to = calloc(n, sizeof *c->to);
  c->from = calloc(n, sizeof *c->from);
  c->scratch = calloc(2 * n, 1);
  if (!c->order || !c->sched.steps || !c->in_off || !c->out_off || !c->len || !c->hosts ||
      !c->group || !c->to || !c->from || !c->scratch) {
    snprintf(err, errlen, "out of memory for the tables of %d ranks", c->size);
    return BATON_ENOMEM;
  }
  return 0;
}

static void free_comm(baton_comm_t *c) {
  baton__shm_destroy(c->shm);
  baton__tcp_destroy(c->tcp);
  if (c->store)
    baton__store_close(c->store);
  if (c->server)
    baton__store_stop(c->server);
  free(c->order);
  free(c->sched.steps);
  free(c->in_off);
  free(c->out_off);
  free(c->len);
  free(c->hosts);
  free(c->group);
  free(c->to);
  free(c->from);
  free(c->scratch);
  free(c);
}

/* The ring visits the ranks of each host consecutively (hosts in order of
 * their lowest rank, ranks ascending inside a host), so it crosses every
 * host boundary once in each direction whatever the rank numbering. */
static void choose_ring(baton_comm_t *c) {
  int n = 0;
  for (int g = 0; g < c->size; g++)
    for (int r = 0; r < c->size; r++)
      if (c->group[r] == g)
        c->order[n++] = r;
}

static int share_id(baton_comm_t *c, char *err, size_t errlen) {
  size_t len = 0;
  if (c->rank == 0) {
    uint64_t id = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&id, sizeof id, 1, f) != 1)
      id = (uint64_t)getpid() << 32 ^ (uint64_t)(baton__now() * 1e9);
    if (f)
      fclose(f);
    c->id = id;
    return baton__store_set(c->store, "comm.id", &c->id, sizeof c->id, err, errlen);
  }
  int rc = baton__store_get(c->store, "comm.id", &c->id, sizeof c->id, &len,
                            c->params.timeout_s, err, errlen);
  if (rc == 0 && len != sizeof c->id) {
    snprintf(err, errlen, "rank 0 published a malformed communicator id");
    rc = BATON_EPROTO;
  }
  return rc;
}

/* Shared memory between the ranks of this host (unless BATON_TRANSPORT=tcp),
 * TCP for the ring's edges that leave it. */
static int connect_ring(baton_comm_t *c, const char *rendezvous, char *err, size_t errlen) {
  int n = c->size, pos = 0;
  while (c->order[pos] != c->rank)
    pos++;
  int next = c->order[(pos + 1) % n], prev = c->order[(pos + n - 1) % n];
  int tcp_only = strcmp(c->params.transport, "tcp") == 0;
  int *local = calloc((size_t)n, sizeof *local), nlocal = 0, rc = 0;
  if (!local) {
    snprintf(err, errlen, "out of memory");
    return BATON_ENOMEM;
  }
  for (int r = 0; r < n; r++)
    if (c->group[r] == c->group[c->rank] && (!tcp_only || r == c->rank))
      local[nlocal++] = r;
  c->one_host = nlocal == n;
  if (nlocal > 1) {
    char key[32];
    snprintf(key, sizeof key, "shm.%d", c->group[c->rank]);
    rc = baton__shm_setup(c->store, key, c->rank, local, nlocal, next, prev, &c->params,
                          &c->shm, err, errlen);
  }
  free(local);
  if (rc)
    return rc;
  c->to[next] = baton__shm_send_conn(c->shm);
  c->from[prev] = baton__shm_recv_conn(c->shm);
  if (c->to[next] && c->from[prev])
    return 0;
  char ip[64];
  if ((rc = baton__pick_local_ip(c->params.socket_ifname, rendezvous, ip, sizeof ip, err,
                                 errlen)) != 0)
    return rc;
  baton__tcp_args_t a = {.rank = c->rank, .size = n, .comm_id = c->id, .seq = &c->seq,
                         .to = &next, .from = &prev, .nto = !c->to[next],
                         .nfrom = !c->from[prev], .local_ip = ip, .hosts = c->hosts};
  if ((rc = baton__tcp_setup(c->store, &a, &c->params, &c->tcp, err, errlen)) != 0)
    return rc;
  if (!c->to[next])
    c->to[next] = baton__tcp_send_conn(c->tcp, next);
  if (!c->from[prev])
    c->from[prev] = baton__tcp_recv_conn(c->tcp, prev);
  return 0;
}

static void log_ready(const baton_comm_t *c) {
  char ring[1024];
  size_t off = 0;
  for (int i = 0; i < c->size && off < sizeof ring - 96; i++) {
    int r = c->order[i], q = c->order[(i + 1) % c->size];
    int shm = c->group[r] == c->group[q] && strcmp(c->params.transport, "tcp") != 0;
    const char *via = shm ? " =shm=> " : " =tcp=> ";
    off += (size_t)snprintf(ring + off, sizeof ring - off, "%d(%s)%s", r, c->hosts[r],
                            c->size > 1 ? via : "");
  }
  if (c->size > 1 && off < sizeof ring - 16)
    snprintf(ring + off, sizeof ring - off, "%d", c->order[0]);
  BATON_INFO(INIT, "rank %d of %d ready: transport %s, segment %zu bytes, ring %s", c->rank,
             c->size, c->tcp && c->shm ? "shm+tcp" : c->tcp ? "tcp" : "shm",
             c->params.segment_bytes, ring);
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
  if (c->rank == 0 && (rc = baton__store_serve(host, port, &c->server, err, errlen)) != 0)
    goto fail;
  if ((rc = baton__store_connect(host, port, c->params.timeout_s, &c->store, err, errlen)) != 0)
    goto fail;
  if ((rc = alloc_tables(c, err, errlen)) != 0 || (rc = learn_hosts(c, err, errlen)) != 0 ||
      (rc = share_id(c, err, errlen)) != 0)
    goto fail;
  choose_ring(c);
  if (c->size > 1 && (rc = connect_ring(c, host, err, errlen)) != 0)
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
  if (comm->size > 1)
    rc = baton_barrier(comm);
  free_comm(comm);
  return rc;
}

int baton_comm_rank(const baton_comm_t *comm) { return comm ? comm->rank : -1; }
int baton_comm_size(const baton_comm_t *comm) { return comm ? comm->size : -1; }

const char *baton_comm_last_error(const baton_comm_t *comm) {
  return comm ? comm->last_error : "comm is NULL";
}
