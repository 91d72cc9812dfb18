/*
 * uniqueid.c - the unique id of baton_comm_init_rank: baton_get_unique_id
 * starts the store that the communicator will use (on a port of its own,
 * also in a process that has communicators) and writes its address and a
 * nonce into the id; the store waits in this process's registry until
 * baton_comm_init_rank, given that id, adopts it.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "store.h"

/* Stores started by baton_get_unique_id, waiting for the communicator of
 * this process that will own them. */
#define MAX_PENDING 16
static struct {
  char nonce[33];
  baton__store_server_t *srv;
} pending[MAX_PENDING];
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;

#define ID_PREFIX "baton-id-1 "

/* "baton-id-1 <host:port> <nonce>" */
int baton__unique_id_parse(const baton_unique_id_t *id, char *addr, size_t addrlen, char *nonce) {
  char buf[BATON_UNIQUE_ID_BYTES + 1];
  memcpy(buf, id->internal, BATON_UNIQUE_ID_BYTES);
  buf[BATON_UNIQUE_ID_BYTES] = '\0';
  char a[100];
  if (strncmp(buf, ID_PREFIX, strlen(ID_PREFIX)) != 0 ||
      sscanf(buf + strlen(ID_PREFIX), "%99s %32s", a, nonce) != 2 || strlen(nonce) != 32)
    return -1;
  snprintf(addr, addrlen, "%s", a);
  return 0;
}

/* The store of a new id: on BATON_ADDR when that can be bound; else (its
 * port held, as under baton-run by the job's rank 0) a free port on its
 * host; else (its host is another machine's) a free port on the interface
 * of BATON_SOCKET_IFNAME or the first one that is up. Without BATON_ADDR,
 * only the last. host gets the address served on; err names every address
 * tried when none could be bound. */
static int serve_id_store(const baton__params_t *p, const baton__secret_t *secret, char *host,
                          size_t hostlen, baton__store_server_t **srv, char *err, size_t errlen) {
  char ip[64] = "127.0.0.1", tried[3][BATON__ERRLEN / 3];
  int port = 0, ntried = 0, rc = BATON_ESYS;
  if (p->addr[0]) {
    if ((rc = baton__parse_hostport(p->addr, "BATON_ADDR", host, hostlen, &port, err, errlen)) != 0)
      return rc;
    int ports[2] = {port, 0};
    for (int i = 0; i < 2; i++) {
      if ((rc = baton__store_serve(host, ports[i], secret, p->timeout_s, srv, tried[ntried],
                                   sizeof tried[0])) == BATON_OK)
        return BATON_OK;
      baton__log_info(BOOT, "unique id: %s", tried[ntried++]);
    }
  }
  if (baton__pick_local_ip(p->socket_ifname, "", ip, sizeof ip, err, errlen) != 0) {
    if (p->socket_ifname[0])
      return BATON_EUSAGE;
    snprintf(ip, sizeof ip, "127.0.0.1"); /* no network: this host only */
  }
  if (!p->addr[0] || strcmp(ip, host) != 0) {
    snprintf(host, hostlen, "%s", ip);
    if ((rc = baton__store_serve(host, 0, secret, p->timeout_s, srv, tried[ntried],
                                 sizeof tried[0])) == BATON_OK)
      return BATON_OK;
    ntried++;
  }
  size_t off = (size_t)snprintf(err, errlen, "baton_get_unique_id: no address to serve on:");
  for (int i = 0; i < ntried && off < errlen; i++)
    off += (size_t)snprintf(err + off, errlen - off, "%s %s", i ? ";" : "", tried[i]);
  return rc;
}

int baton_get_unique_id(baton_unique_id_t *id) {
  char *err = baton__init_error, host[256] = "";
  size_t errlen = sizeof baton__init_error;
  baton__params_t p;
  int rc;
  if (!id) {
    snprintf(err, errlen, "baton_get_unique_id: id is NULL");
    return BATON_EINVAL;
  }
  if ((rc = baton__params_load(&p, err, errlen)) != 0)
    return rc;
  unsigned char r[16];
  FILE *f = fopen("/dev/urandom", "rb");
  int got = f && fread(r, sizeof r, 1, f) == 1;
  if (f)
    fclose(f);
  if (!got) {
    snprintf(err, errlen, "cannot read /dev/urandom for the unique id");
    return BATON_ESYS;
  }
  char nonce[33], addr[80];
  for (int i = 0; i < 16; i++)
    snprintf(nonce + 2 * i, 3, "%02x", r[i]);
  baton__secret_t secret; /* as load_secret() will choose it */
  baton__store_server_t *srv;
  if ((rc = baton__secret_set(&secret, p.secret[0] ? p.secret : nonce, err, errlen)) != 0 ||
      (rc = serve_id_store(&p, &secret, host, sizeof host, &srv, err, errlen)) != 0)
    return rc;
  baton__store_format_addr(addr, sizeof addr, host, baton__store_port(srv));
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, ID_PREFIX "%.79s %.32s", addr, nonce);
  pthread_mutex_lock(&pending_lock);
  int slot = -1;
  for (int i = 0; i < MAX_PENDING && slot < 0; i++)
    if (!pending[i].srv)
      slot = i;
  if (slot >= 0) {
    pending[slot].srv = srv;
    snprintf(pending[slot].nonce, sizeof pending[slot].nonce, "%s", nonce);
  }
  pthread_mutex_unlock(&pending_lock);
  if (slot < 0) {
    baton__store_stop(srv);
    snprintf(err, errlen, "more than %d unique ids wait for their communicators", MAX_PENDING);
    return BATON_EUSAGE;
  }
  baton__log_info(BOOT, "unique id: rendezvous at %s", addr);
  return BATON_OK;
}

baton__store_server_t *baton__unique_id_adopt(const char *nonce) {
  baton__store_server_t *srv = NULL;
  pthread_mutex_lock(&pending_lock);
  for (int i = 0; i < MAX_PENDING && !srv; i++)
    if (pending[i].srv && strcmp(pending[i].nonce, nonce) == 0) {
      srv = pending[i].srv;
      pending[i].srv = NULL;
    }
  pthread_mutex_unlock(&pending_lock);
  return srv;
}
