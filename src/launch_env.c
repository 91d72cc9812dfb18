/*
 * launch_env.c - rank, size and rendezvous address from whichever launcher
 * started the process, so that a baton program runs unchanged under
 * baton-run, torchrun, Open MPI's mpirun, MPICH's Hydra or Slurm's srun.
 *
 * Each launcher is one row: the variables it sets for the rank, the size,
 * the rank on this host and the ranks on this host. The first row whose rank
 * variable is set is the source; BATON_RANK and BATON_SIZE, when set, win
 * over it one by one. The rows run from the innermost launcher to the
 * outermost: mpirun or torchrun started inside a Slurm allocation still see
 * the allocation's SLURM_PROCID, which is not theirs.
 *
 * The rendezvous address is BATON_ADDR, else MASTER_ADDR:MASTER_PORT. Under
 * a real torchrun (TORCHELASTIC_USE_AGENT_STORE=True) the agent's own store
 * already listens on MASTER_PORT, so baton takes the port above it. MPI and
 * Slurm name no address; with neither variable set that is an error that
 * says what to set. baton_comm_init_rank (the unique-id path, which MPI
 * programs take through baton_mpi.h) does not read any of this.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct {
  const char *name;                    /* for people */
  const char *rank, *size;             /* variables; both needed */
  const char *local_rank, *local_size; /* variables; NULL: not set */
} launcher_t;

static const launcher_t launchers[] = {
    {"BATON_*", "BATON_RANK", "BATON_SIZE", "BATON_LOCAL_RANK", "BATON_LOCAL_SIZE"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH Hydra", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL},
};

#define NLAUNCHERS (sizeof launchers / sizeof launchers[0])
#define MAX_RANKS (1 << 20) /* as BATON_SIZE's row in param.c */

/* Reads integer variable `name` in [min, max] into *out (untouched when the
 * variable is unset). A malformed value is an error naming it and `from`. */
static int env_int(const char *name, const char *from, long min, long max, int *out, char *err,
                   size_t errlen) {
  const char *s = name ? getenv(name) : NULL;
  char *end;
  if (!s)
    return BATON_OK;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) {
    snprintf(err, errlen, "%s=\"%s\" (from %s) is not an integer in %ld..%ld", name, s, from, min,
             max);
    return BATON_EUSAGE;
  }
  *out = (int)v;
  return BATON_OK;
}

/* The launcher whose rank variable is set, BATON_* aside; NULL if none. */
static const launcher_t *detect(void) {
  for (size_t i = 1; i < NLAUNCHERS; i++)
    if (getenv(launchers[i].rank))
      return &launchers[i];
  return NULL;
}

/* Rank and size: BATON_* (already parsed by the loader) where set, the
 * launcher's variables for the rest. Fills p->launcher. */
static int read_rank_size(baton__params_t *p, const launcher_t *src, char *err, size_t errlen) {
  const launcher_t *baton = &launchers[0];
  int baton_rank = getenv(baton->rank) != NULL, baton_size = getenv(baton->size) != NULL;
  int rc = BATON_OK;
  if (!src || (baton_rank && baton_size)) {
    snprintf(p->launcher, sizeof p->launcher, "%s%s%s", baton->name, src ? ", over " : "",
             src ? src->name : "");
  } else {
    if (!baton_size && !getenv(src->size)) {
      snprintf(err, errlen, "%s is set (%s) but %s is not: set it, or BATON_SIZE", src->rank,
               src->name, src->size);
      return BATON_EUSAGE;
    }
    if (!baton_rank)
      rc = env_int(src->rank, src->name, 0, MAX_RANKS - 1, &p->rank, err, errlen);
    if (rc == BATON_OK && !baton_size)
      rc = env_int(src->size, src->name, 1, MAX_RANKS, &p->size, err, errlen);
    snprintf(p->launcher, sizeof p->launcher, "%s (%s, %s)", src->name,
             baton_rank ? baton->rank : src->rank, baton_size ? baton->size : src->size);
  }
  if (rc == BATON_OK && p->rank >= 0 && p->size >= 0 && p->rank >= p->size) {
    const launcher_t *r = baton_rank || !src ? baton : src, *s = baton_size || !src ? baton : src;
    snprintf(err, errlen, "%s=%d is not below %s=%d (rank and size from %s)", r->rank, p->rank,
             s->size, p->size, p->launcher);
    rc = BATON_EUSAGE;
  }
  return rc;
}

/* The rank and size on this host, from the same launcher; -1 when unknown. */
static int read_local(baton__params_t *p, const launcher_t *src, char *err, size_t errlen) {
  const launcher_t *baton = &launchers[0];
  int rc;
  p->local_rank = p->local_size = -1;
  if ((rc = env_int(baton->local_rank, baton->name, 0, MAX_RANKS - 1, &p->local_rank, err,
                    errlen)) ||
      (rc = env_int(baton->local_size, baton->name, 1, MAX_RANKS, &p->local_size, err, errlen)))
    return rc;
  if (!src)
    return BATON_OK;
  if (p->local_rank < 0 &&
      (rc = env_int(src->local_rank, src->name, 0, MAX_RANKS - 1, &p->local_rank, err, errlen)))
    return rc;
  if (p->local_size < 0)
    rc = env_int(src->local_size, src->name, 1, MAX_RANKS, &p->local_size, err, errlen);
  return rc;
}

/* BATON_ADDR, else MASTER_ADDR:MASTER_PORT. Fills p->addr and p->addr_from. */
static int read_addr(baton__params_t *p, const launcher_t *src, char *err, size_t errlen) {
  const char *host = getenv("MASTER_ADDR"), *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
  int port = 0, rc;
  if (p->addr[0]) {
    snprintf(p->addr_from, sizeof p->addr_from, "BATON_ADDR");
    return BATON_OK;
  }
  if (!host) {
    if (!src)
      return BATON_OK; /* the caller says BATON_ADDR is missing */
    snprintf(err, errlen,
             "rank and size come from %s, but there is no rendezvous address: "
             "set BATON_ADDR=HOST:PORT (HOST: an address of the machine where rank 0 runs; "
             "with mpirun pass it with -x BATON_ADDR), or MASTER_ADDR and MASTER_PORT; an MPI "
             "program can call baton_comm_init_mpi() from baton_mpi.h instead",
             p->launcher);
    return BATON_EUSAGE;
  }
  if (!getenv("MASTER_PORT")) {
    snprintf(err, errlen,
             "MASTER_ADDR=\"%s\" is set but MASTER_PORT is not: set both, or "
             "BATON_ADDR=HOST:PORT",
             host);
    return BATON_EUSAGE;
  }
  if ((rc = env_int("MASTER_PORT", "the environment", 1, 65535, &port, err, errlen)))
    return rc;
  int agent_store = agent && strcmp(agent, "True") == 0;
  if (agent_store && ++port > 65535) {
    snprintf(err, errlen,
             "MASTER_PORT=65535: torchrun's store has it and there is no port "
             "above it for baton's; set BATON_ADDR=HOST:PORT");
    return BATON_EUSAGE;
  }
  int n = snprintf(p->addr, sizeof p->addr, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
  if (host[0] == '\0' || n < 0 || (size_t)n >= sizeof p->addr) {
    snprintf(err, errlen, "MASTER_ADDR=\"%.64s\" is not a host name or address", host);
    p->addr[0] = '\0';
    return BATON_EUSAGE;
  }
  snprintf(p->addr_from, sizeof p->addr_from, "%s",
           agent_store ? "MASTER_ADDR, MASTER_PORT+1 (torchrun's store has MASTER_PORT)"
                       : "MASTER_ADDR:MASTER_PORT");
  return BATON_OK;
}

int baton__launch_env(baton__params_t *p, char *err, size_t errlen) {
  const launcher_t *src = detect();
  int rc;
  if ((rc = read_rank_size(p, src, err, errlen)))
    return rc;
  if (getenv(launchers[0].rank) && getenv(launchers[0].size))
    src = NULL; /* the launcher is overruled: nothing else of it is read */
  if ((rc = read_local(p, src, err, errlen)) || (rc = read_addr(p, src, err, errlen)))
    return rc;
  if (p->rank < 0 || p->size < 0) {
    snprintf(err, errlen,
             "%s is not set: start the program with baton-run, torchrun, mpirun "
             "or srun, or set BATON_RANK, BATON_SIZE and BATON_ADDR",
             p->rank < 0 ? "BATON_RANK" : "BATON_SIZE");
    return BATON_EUSAGE;
  }
  char local[48] = "";
  if (p->local_rank >= 0 && p->local_size > 0)
    snprintf(local, sizeof local, " (%d of %d on this host)", p->local_rank, p->local_size);
  else if (p->local_rank >= 0)
    snprintf(local, sizeof local, " (%d on this host)", p->local_rank);
  baton__log_rank = p->rank;
  baton__log_info(ENV, "rank %d of %d%s from %s; rendezvous at %s from %s", p->rank, p->size, local,
                  p->launcher, p->addr, p->addr_from);
  return BATON_OK;
}
