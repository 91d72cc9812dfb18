/*
 * bootstrap.c - creating and destroying a communicator.
 *
 * baton_comm_init reads the knobs, meets the other ranks through the store
 * that rank 0 serves at BATON_ADDR, learns which ranks share a host,
 * chooses a ring that visits each host's ranks together and connects the
 * ring: shared memory inside a host, TCP between hosts. Everything a
 * collective needs later (schedule, chunk layout, channels) is allocated
 * here, once, and the end-of-init barrier keeps every rank in init until
 * all are ready. baton_comm_destroy undoes it.
 *
 * A communicator made from another (split.c) learns its ranks, hosts and
 * store from its parent instead of the environment, and shares the rest:
 * baton__comm_tables, then baton__comm_connect (ring, connections, costs,
 * barrier, the INIT line), and baton__comm_free. Failures are fail.c's, the
 * unique id's registry is uniqueid.c's.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "call.h"
#include "comm.h"
#include "mem.h"
#include "p2p.h"
#include "store.h"

/* One per thread, as errno: two threads that make communicators (or local
 * memory) at once each read their own failure's text. */
_Thread_local char baton__init_error[BATON__ERRLEN];

const char *baton_last_init_error(void) { return baton__init_error; }

baton__conn_t *baton__conn_to(baton_comm_t *comm, int peer) {
  return peer >= 0 && peer < comm->size ? comm->to[peer] : NULL;
}

baton__conn_t *baton__conn_from(baton_comm_t *comm, int peer) {
  return peer >= 0 && peer < comm->size ? comm->from[peer] : NULL;
}

/* Ranks share memory when they run under one kernel (boot id) in one
 * network namespace and one PID namespace, unless BATON_HOSTID says
 * otherwise: shared memory finds a lost peer by its pid (and reads a peer
 * by CMA through it), which names nobody, or another process, from
 * another PID namespace. */
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
  unsigned long pidns = stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long)st.st_ino : 0;
  /* The part after the newline is what people see. */
  snprintf(buf, len, "boot=%s netns=%lu pidns=%lu\n%s", boot, netns, pidns, host);
}

/* Publishes this rank's identity and reads everyone's: group[r] is the
 * lowest rank that shares memory with r, hosts[r] a readable name (the host
 * name, with the group when several groups share a host name). */
static int learn_hosts(baton_comm_t *c, char *err, size_t errlen) {
  char(*ids)[160] = calloc((size_t)c->size, sizeof *ids);
  char key[32];
  int rc = ids ? 0 : BATON_ENOMEM, node = BATON__NO_NODE;
  if (rc == 0 && c->params.numa[0]) { /* c->node for now, the published values below */
    rc = baton__numa_parse(c->params.numa, c->size, c->node, err, errlen);
    node = c->node[c->rank];
  } else if (rc == 0) {
    node = baton__numa_node_of_self("/sys/devices/system/node");
  }
  if (rc == 0) {
    host_identity(&c->params, ids[c->rank], sizeof ids[0] - 16);
    size_t l = strlen(ids[c->rank]);
    snprintf(ids[c->rank] + l, sizeof ids[0] - l, "\n%d", node);
    snprintf(key, sizeof key, "host.%d", c->rank);
    rc = baton__store_set(c->store, key, ids[c->rank], strlen(ids[c->rank]) + 1, err, errlen);
  }
  for (int r = 0; r < c->size && rc == 0; r++) {
    size_t len = 0;
    snprintf(key, sizeof key, "host.%d", r);
    rc = baton__store_get(c->store, key, ids[r], sizeof ids[r] - 1, &len, c->params.timeout_s, err,
                          errlen);
    ids[r][len < sizeof ids[r] ? len : sizeof ids[r] - 1] = '\0';
  }
  for (int r = 0; r < c->size && rc == 0; r++) { /* the node ends the line */
    char *last = strrchr(ids[r], '\n');
    c->node[r] = last ? atoi(last + 1) : BATON__NO_NODE;
    if (last)
      *last = '\0';
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

/* Where rank, size and the rendezvous come from when not from the
 * environment (baton_comm_init_rank). */
typedef struct {
  int rank, size;
  const char *addr;
  const char *nonce;    /* the unique id's, the secret when BATON_SECRET is unset */
  const baton_kv_t *kv; /* baton_comm_init_kv's store (then addr and nonce are NULL) */
} given_t;

static int read_identity(baton_comm_t *c, const given_t *given, char *host, size_t hostlen,
                         int *port, char *err, size_t errlen) {
  int rc = baton__params_load(&c->params, err, errlen);
  if (rc || (!given && (rc = baton__launch_env(&c->params, err, errlen))))
    return rc;
  if (given) {
    c->params.rank = given->rank;
    c->params.size = given->size;
    snprintf(c->params.addr, sizeof c->params.addr, "%s", given->kv ? "-" : given->addr);
    if (given->kv && given->kv->timeout_s > 0)
      c->params.timeout_s = given->kv->timeout_s;
    if (given->size < 1 || given->rank < 0) {
      snprintf(err, errlen, "%s: size %d must be positive and rank %d not negative",
               given->kv ? "baton_comm_init_kv" : "baton_comm_init_rank", given->size, given->rank);
      return BATON_EINVAL;
    }
  }
  const char *missing = c->params.rank < 0   ? "BATON_RANK"
                        : c->params.size < 0 ? "BATON_SIZE"
                        : !c->params.addr[0] ? "BATON_ADDR"
                                             : NULL;
  if (missing) {
    snprintf(err, errlen,
             "%s is not set: start the program with baton-run, or set "
             "BATON_RANK, BATON_SIZE and BATON_ADDR",
             missing);
    return BATON_EUSAGE;
  }
  if (c->params.rank >= c->params.size) {
    snprintf(err, errlen, "%s %d is not below %s %d", given ? "rank" : "BATON_RANK", c->params.rank,
             given ? "size" : "BATON_SIZE", c->params.size);
    return given ? BATON_EINVAL : BATON_EUSAGE;
  }
  if (strcmp(c->params.transport, "auto") != 0 && strcmp(c->params.transport, "tcp") != 0) {
    snprintf(err, errlen, "BATON_TRANSPORT=\"%s\" is neither \"auto\" nor \"tcp\"",
             c->params.transport);
    return BATON_EUSAGE;
  }
  c->rank = c->params.rank;
  c->size = c->params.size;
  baton__log_rank = c->rank;
  if (given && given->kv)
    return BATON_OK;
  return baton__parse_hostport(c->params.addr, given ? "the unique id's address" : "BATON_ADDR",
                               host, hostlen, port, err, errlen);
}

int baton__comm_tables(baton_comm_t *c, char *err, size_t errlen) {
  size_t n = (size_t)c->size;
  c->order = calloc(n, sizeof *c->order);
  c->host = calloc(n, sizeof *c->host);
  c->hosts = calloc(n, sizeof *c->hosts);
  c->group = calloc(n, sizeof *c->group);
  c->node = calloc(n, sizeof *c->node);
  c->to = calloc(n, sizeof *c->to);
  c->from = calloc(n, sizeof *c->from);
  c->flushers = calloc(n, sizeof *c->flushers);
  c->boxes = calloc(2 * n, sizeof *c->boxes);
  if (!c->order || !c->host || !c->hosts || !c->group || !c->node || !c->to || !c->from ||
      !c->flushers || !c->boxes) {
    snprintf(err, errlen, "out of memory for the tables of %d ranks", c->size);
    return BATON_ENOMEM;
  }
  return 0;
}

baton_comm_t *baton__comm_new(void) {
  baton_comm_t *c = calloc(1, sizeof *c);
  if (c)
    pthread_mutex_init(&c->err_mu, NULL);
  return c;
}

void baton__comm_free(baton_comm_t *c, int clean) {
  baton__trace_close(c->trace);
  baton__select_free(c);
  baton__p2p_free(c, clean);
  for (int i = 0; i < c->nnet; i++)
    c->net[i].ops->destroy(c->net[i].impl, clean);
  if (c->store)
    baton__store_close(c->store);
  if (c->server)
    baton__store_stop(c->server);
  baton__calls_free(c);
  baton__mem_free_all(c);
  free(c->order);
  free(c->host);
  free(c->hosts);
  free(c->group);
  free(c->node);
  free(c->to);
  free(c->from);
  free(c->flushers);
  free(c->boxes);
  pthread_mutex_destroy(&c->err_mu);
  free(c);
}

/* The ring visits the ranks of each host consecutively (hosts in order of
 * their lowest rank), and inside a host the ranks of each NUMA node
 * consecutively (nodes in order of their lowest rank, ranks ascending
 * inside a node), so it crosses every host boundary, and every node
 * boundary of a host, once in each direction whatever the numbering. */
static void choose_ring(baton_comm_t *c) {
  int n = 0;
  c->nhosts = 0;
  for (int g = 0; g < c->size; g++) {
    int any = 0;
    for (int r = 0; r < c->size; r++) {
      if (c->group[r] != g)
        continue;
      int first = 1; /* r is the lowest rank of its node on this host */
      for (int q = 0; q < r && first; q++)
        first = c->group[q] != g || c->node[q] != c->node[r];
      for (int q = r; first && q < c->size; q++)
        if (c->group[q] == g && c->node[q] == c->node[r]) {
          c->order[n++] = q;
          c->host[q] = c->nhosts;
        }
      any = 1;
    }
    c->nhosts += any;
  }
}

/* n random bytes from /dev/urandom; 0, or -1 when it cannot be read. */
static int random_bytes(void *p, size_t n) {
  FILE *f = fopen("/dev/urandom", "rb");
  int ok = f && fread(p, n, 1, f) == 1;
  if (f)
    fclose(f);
  return ok ? 0 : -1;
}

static int share_id(baton_comm_t *c, char *err, size_t errlen) {
  size_t len = 0;
  if (c->rank == 0) {
    uint64_t id = 0;
    if (random_bytes(&id, sizeof id) != 0)
      id = (uint64_t)getpid() << 32 ^ (uint64_t)(baton__now() * 1e9);
    c->id = id;
    return baton__store_set(c->store, "comm.id", &c->id, sizeof c->id, err, errlen);
  }
  int rc = baton__store_get(c->store, "comm.id", &c->id, sizeof c->id, &len, c->params.timeout_s,
                            err, errlen);
  if (rc == 0 && len != sizeof c->id) {
    snprintf(err, errlen, "rank 0 published a malformed communicator id");
    rc = BATON_EPROTO;
  }
  return rc;
}

static baton__net_t *net_add(baton_comm_t *c, const baton__fabric_t *ops, void *impl) {
  c->net[c->nnet] = (baton__net_t){ops, impl};
  return &c->net[c->nnet++];
}

/* The connections of net, to and from each rank that no transport added
 * before reaches. */
static void net_conns(baton_comm_t *c, const baton__net_t *net) {
  for (int r = 0; r < c->size; r++) {
    if (r == c->rank)
      continue;
    if (!c->to[r])
      c->to[r] = net->ops->conn_to(net->impl, r);
    if (!c->from[r])
      c->from[r] = net->ops->conn_from(net->impl, r);
  }
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
    baton__shm_t *shm = NULL;
    rc = baton__shm_setup(c->store, key, c->rank, local, nlocal, next, prev, &c->params, &shm, err,
                          errlen);
    if (rc == 0) {
      c->host_net = net_add(c, &baton__shm_fabric, shm);
      c->cma = baton__shm_cma(shm);
    }
  }
  free(local);
  if (rc)
    return rc;
  /* Every other rank is reachable: the ring's neighbours through the ring's
   * channels, the rest for the algorithms that talk to any rank. */
  int *remote = calloc((size_t)n, sizeof *remote), nremote = 0;
  if (!remote) {
    snprintf(err, errlen, "out of memory");
    return BATON_ENOMEM;
  }
  if (c->host_net)
    net_conns(c, c->host_net);
  for (int r = 0; r < n; r++)
    if (r != c->rank && !c->to[r])
      remote[nremote++] = r;
  /* The ring's segment, the same on every rank: a segment is forwarded
   * from one edge to the next, so it fits the smallest slot of any edge of
   * the whole ring, shared memory or TCP. */
  size_t shm_slot = c->params.segment_bytes / 64 * 64,
         tcp_slot = c->params.tcp_segment_bytes / 64 * 64;
  c->slot_bytes = 0;
  for (int i = 0; i < n; i++) {
    int a = c->order[i], b = c->order[(i + 1) % n];
    size_t slot = c->group[a] == c->group[b] && !tcp_only ? shm_slot : tcp_slot;
    if (!c->slot_bytes || slot < c->slot_bytes)
      c->slot_bytes = slot;
  }
  if (nremote == 0) {
    free(remote);
    return 0;
  }
  char ip[64];
  if ((rc = baton__pick_local_ip(c->params.socket_ifname, rendezvous, ip, sizeof ip, err,
                                 errlen)) != 0) {
    free(remote);
    return rc;
  }
  baton__tcp_args_t a = {.rank = c->rank,
                         .size = n,
                         .comm_id = c->id,
                         .sig = &c->sig,
                         .to = remote,
                         .from = remote,
                         .nto = nremote,
                         .nfrom = nremote,
                         .local_ip = ip,
                         .hosts = c->hosts,
                         .secret = &c->secret};
  baton__tcp_t *tcp = NULL;
  rc = baton__tcp_setup(c->store, &a, &c->params, &tcp, err, errlen);
  if (rc == 0)
    net_conns(c, net_add(c, &baton__tcp_fabric, tcp));
  free(remote);
  return rc;
}

/* No rank leaves init before all have: a rank whose first collective fails
 * at once must not stop the store (rank 0) or close connections while a
 * slower rank still sets up. Collective number 0 is this barrier. */
static int init_barrier(baton_comm_t *c, char *err, size_t errlen) {
  int rc = baton__init_barrier(c);
  if (rc)
    snprintf(err, errlen, "the end-of-init barrier failed: %.440s", baton_comm_last_error(c));
  return rc;
}

static void log_ready(const baton_comm_t *c, const char *origin) {
  char ring[1024];
  size_t off = 0;
  int nshm = 0, ntcp = 0;
  for (int i = 0; i < c->size && off < sizeof ring - 96; i++) {
    int r = c->order[i], q = c->order[(i + 1) % c->size];
    int shm = c->group[r] == c->group[q] && strcmp(c->params.transport, "tcp") != 0;
    const char *via = shm ? " =shm=> " : " =tcp=> ";
    char node[16] = ""; /* the rank's NUMA node, where it has one */
    if (c->node[r] != BATON__NO_NODE)
      snprintf(node, sizeof node, "/n%d", c->node[r]);
    off += (size_t)snprintf(ring + off, sizeof ring - off, "%d(%s%s)%s", r, c->hosts[r], node,
                            c->size > 1 ? via : "");
  }
  if (c->size > 1 && off < sizeof ring - 16)
    snprintf(ring + off, sizeof ring - off, "%d", c->order[0]);
  for (int r = 0; r < c->size; r++)
    if (c->to[r]) {
      int shm = c->group[r] == c->group[c->rank] && strcmp(c->params.transport, "tcp") != 0;
      nshm += shm, ntcp += !shm;
    }
  char nets[32] = "shm"; /* a single rank: nothing, but it would be */
  for (int i = 0, k = 0; i < c->nnet; i++)
    k += snprintf(nets + k, sizeof nets - (size_t)k, "%s%s", i ? "+" : "", c->net[i].ops->name);
  baton__log_info(INIT,
                  "rank %d of %d ready: communicator %016llx%s, transport %s, segment %zu bytes, "
                  "links to %d peers by shm and %d by tcp, ring %s",
                  c->rank, c->size, (unsigned long long)c->id, origin, nets, c->slot_bytes, nshm,
                  ntcp, ring);
}

/* The steps after the ranks, hosts, store, id and knobs (BATON_ALGO's
 * table included) are known, the same for a communicator from the
 * environment and one from a parent: the ring and
 * its connections, the call objects, the link costs, the end-of-init
 * barrier. origin ends the INIT line's communicator part. */
int baton__comm_connect(baton_comm_t *c, const char *origin, char *err, size_t errlen) {
  int rc;
  if (c->params.trace[0] &&
      (rc = baton__trace_open(&c->trace, c->params.trace, c->rank, c->size, err, errlen)) != 0)
    return rc;
  if ((rc = baton__calls_init(c)) != 0) {
    snprintf(err, errlen, "out of memory for the call objects of %d ranks", c->size);
    return rc;
  }
  choose_ring(c);
  c->watch = (baton__watch_t){baton__comm_check, c};
  if (c->size > 1 && (rc = connect_ring(c, baton__store_host(c->store), err, errlen)) != 0)
    return rc;
  if ((rc = baton__p2p_connect(c, err, errlen)) != 0)
    return rc;
  for (int r = 0; r < c->size; r++) {
    baton__conn_t *k[2] = {c->to[r], c->from[r]};
    for (int i = 0; i < 2; i++)
      if (k[i])
        k[i]->sig = &c->sig, k[i]->self = c->rank;
  }
  /* Messages of the other algorithms fit every kind of connection; this
   * depends on the settings only, so it is the same on every rank. */
  c->stream_slot_bytes = c->params.pair_segment_bytes < c->params.segment_bytes
                             ? c->params.pair_segment_bytes
                             : c->params.segment_bytes;
  if (c->params.tcp_segment_bytes < c->stream_slot_bytes)
    c->stream_slot_bytes = c->params.tcp_segment_bytes;
  c->stream_slot_bytes = c->stream_slot_bytes / 64 * 64;
  if ((rc = baton__select_init(c, err, errlen)) != 0)
    return rc;
  for (int i = 0; i < c->nnet; i++)
    c->net[i].ops->watch(c->net[i].impl, &c->watch);
  c->shm_calls = 1; /* the set-up rendezvous */
  if (c->size > 1 && (rc = init_barrier(c, err, errlen)) != 0)
    return rc;
  log_ready(c, origin);
  return BATON_OK;
}

/* ----------------------------------------------------------------- init */

/* The secret every connection of this communicator proves: BATON_SECRET, or
 * else the nonce of the unique id, which only the processes it was handed
 * to know. With neither, rank 0 (which serves the store) says once per
 * process that anyone may connect. */
static int load_secret(baton_comm_t *c, const given_t *given, const char *host, int port, char *err,
                       size_t errlen) {
  static int warned;
  const char *text = c->params.secret[0] || !given ? c->params.secret : given->nonce;
  int rc = baton__secret_set(&c->secret, text, err, errlen);
  if (rc == BATON_OK && c->secret.len == 0 && c->rank == 0 && !warned) {
    warned = 1;
    baton__log_warn(INIT,
                    "BATON_SECRET is not set: the store at %s:%d accepts any process that "
                    "connects; baton-run sets a secret for each job",
                    host, port);
  }
  return rc;
}

/* Over a caller's store without BATON_SECRET: rank 0 draws the secret and
 * puts it in the store, so that only those who can read the store can
 * connect to the ranks. */
static int kv_secret(baton_comm_t *c, char *err, size_t errlen) {
  char text[2 * 16 + 1] = "";
  size_t len = 0;
  int rc;
  if (c->params.secret[0])
    return baton__secret_set(&c->secret, c->params.secret, err, errlen);
  if (c->rank == 0) {
    unsigned char raw[16];
    if (random_bytes(raw, sizeof raw) != 0) {
      snprintf(err, errlen, "cannot read /dev/urandom for the communicator's secret");
      return BATON_ESYS;
    }
    for (size_t i = 0; i < sizeof raw; i++)
      snprintf(text + 2 * i, 3, "%02x", raw[i]);
    if ((rc = baton__store_set(c->store, "secret", text, sizeof text, err, errlen)) != 0)
      return rc;
  } else if ((rc = baton__store_get(c->store, "secret", text, sizeof text, &len,
                                    c->params.timeout_s, err, errlen)) != 0) {
    return rc;
  } else if (len != sizeof text || text[sizeof text - 1] != '\0') {
    snprintf(err, errlen, "rank 0 put a malformed secret in the store (%zu bytes)", len);
    return BATON_EPROTO;
  }
  return baton__secret_set(&c->secret, text, err, errlen);
}

/* Where the data connections should face: the interface that routes to
 * MASTER_ADDR (torch.distributed's env://) when it names an IPv4 host. */
static void kv_host_hint(char *host, size_t cap) {
  const char *m = getenv("MASTER_ADDR");
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
  host[0] = '\0';
  if (m && m[0] && getaddrinfo(m, NULL, &hints, &res) == 0 && res) {
    inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, host, (socklen_t)cap);
    freeaddrinfo(res);
  }
}

static int init_comm(baton_comm_t **comm, const given_t *given, baton__store_server_t *srv) {
  char *err = baton__init_error, host[256];
  size_t errlen = sizeof baton__init_error;
  int port, rc;
  err[0] = '\0';
  if (!comm) {
    snprintf(err, errlen, "baton_comm_init: comm is NULL");
    if (srv)
      baton__store_stop(srv);
    return BATON_EINVAL;
  }
  *comm = NULL;
  baton_comm_t *c = baton__comm_new();
  if (!c) {
    snprintf(err, errlen, "out of memory");
    if (srv)
      baton__store_stop(srv);
    return BATON_ENOMEM;
  }
  c->server = srv;
  if (given && given->kv) {
    kv_host_hint(host, sizeof host);
    if ((rc = read_identity(c, given, NULL, 0, NULL, err, errlen)) != 0 ||
        (rc = baton__store_connect_kv(given->kv, host, c->params.timeout_s, &c->store, err,
                                      errlen)) != 0 ||
        (rc = kv_secret(c, err, errlen)) != 0)
      goto fail;
  } else if ((rc = read_identity(c, given, host, sizeof host, &port, err, errlen)) != 0 ||
             (rc = load_secret(c, given, host, port, err, errlen)) != 0) {
    goto fail;
  }
  if (!given && c->rank == 0 &&
      (rc = baton__store_serve(host, port, &c->secret, c->params.timeout_s, &c->server, err,
                               errlen)) != 0)
    goto fail;
  if (!c->store && (rc = baton__store_connect(host, port, c->params.timeout_s, &c->secret,
                                              &c->store, err, errlen)) != 0)
    goto fail;
  if ((rc = baton__algo_parse(c->params.algo, c->forced, err, errlen)) != 0 ||
      (rc = baton__comm_tables(c, err, errlen)) != 0 || (rc = learn_hosts(c, err, errlen)) != 0 ||
      (rc = share_id(c, err, errlen)) != 0 || (rc = baton__comm_connect(c, "", err, errlen)) != 0)
    goto fail;
  *comm = c;
  return BATON_OK;
fail:
  baton__log_warn(INIT, "baton_comm_init failed: %s: %s", baton_err_name(rc), err);
  baton__comm_free(c, 0);
  return rc;
}

int baton_comm_init(baton_comm_t **comm) { return init_comm(comm, NULL, NULL); }

int baton_comm_init_rank(baton_comm_t **comm, int size, const baton_unique_id_t *id, int rank) {
  char addr[128], nonce[33];
  if (!id || baton__unique_id_parse(id, addr, sizeof addr, nonce) != 0) {
    snprintf(baton__init_error, sizeof baton__init_error, "baton_comm_init_rank: %s",
             id ? "the id was not "
                  "made by baton_get_unique_id (or was damaged on the way)"
                : "id is NULL");
    if (comm)
      *comm = NULL;
    return BATON_EINVAL;
  }
  given_t g = {rank, size, addr, nonce, NULL};
  if (size < 1 || rank < 0 || rank >= size) /* fail before taking the store */
    return init_comm(comm, &g, NULL);
  return init_comm(comm, &g, baton__unique_id_adopt(nonce));
}

int baton_comm_init_kv(baton_comm_t **comm, int size, int rank, const baton_kv_t *kv) {
  const char *bad = !kv                    ? "kv is NULL"
                    : !kv->set || !kv->get ? "kv->set or kv->get is NULL"
                    : kv->timeout_s < 0 || kv->timeout_s != kv->timeout_s
                        ? "kv->timeout_s is negative or not a number"
                        : NULL;
  if (bad) {
    snprintf(baton__init_error, sizeof baton__init_error, "baton_comm_init_kv: %s", bad);
    if (comm)
      *comm = NULL;
    return BATON_EINVAL;
  }
  given_t g = {rank, size, NULL, NULL, kv};
  return init_comm(comm, &g, NULL);
}

int baton_comm_destroy(baton_comm_t *comm) {
  if (!comm)
    return BATON_OK;
  int rc = BATON_OK;
  /* First, so that what follows (an abort of the requests in flight, a
   * failed barrier) is no failure of the children. */
  baton__family_unlink(comm);
  /* Requests still in flight complete with BATON_EABORTED: saying so is
   * all this rank can do for them. */
  int left = baton__progress_stop(comm) + baton__p2p_stop(comm);
  if (left) {
    rc = baton__fail(comm, BATON_EUSAGE,
                     "baton_comm_destroy: %d request%s still in flight; %s completed with "
                     "BATON_EABORTED and freed",
                     left, left == 1 ? " was" : "s were", left == 1 ? "it" : "they");
  } else if (comm->size > 1) {
    /* Nobody may be mid-collective when rank 0 stops the store. */
    rc = baton_barrier(comm);
  }
  /* After a failure over TCP, peers may still come to the store for its
   * cause (explain()): the store outlives the failure by a moment. */
  if (comm->fatal_rc && comm->server && baton__reaches_other_hosts(comm))
    usleep(1000 * 1000);
  baton__comm_free(comm, rc == BATON_OK && !comm->fatal_rc);
  return rc;
}

int baton_comm_rank(const baton_comm_t *comm) { return comm ? comm->rank : -1; }
int baton_comm_size(const baton_comm_t *comm) { return comm ? comm->size : -1; }
