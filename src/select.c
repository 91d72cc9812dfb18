/*
 * select.c - which algorithm runs a collective.
 *
 * BATON_ALGO forces a choice, for every collective an algorithm serves
 * ("rhd") or per collective ("allreduce:ring,broadcast:tree"); it is parsed
 * once, at init, and an unknown name is an error there. Otherwise, and
 * where the forced algorithm cannot serve a call, the cost model picks.
 */
#include <stdio.h>
#include <string.h>

#include "comm.h"

int baton__algo_parse(const char *spec, const baton__algo_t **forced, char *err,
                      size_t errlen) {
  for (int c = 0; c < BATON__COLL_COUNT; c++)
    forced[c] = NULL;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", spec);
  for (char *save = NULL, *item = strtok_r(buf, ",", &save); item;
       item = strtok_r(NULL, ",", &save)) {
    while (*item == ' ')
      item++;
    char *colon = strchr(item, ':');
    const char *name = colon ? colon + 1 : item;
    const baton__algo_t *algo = baton__algo_find(name);
    if (!algo) {
      int n;
      const baton__algo_t *all = baton__algos(&n);
      size_t off = (size_t)snprintf(err, errlen, "BATON_ALGO: unknown algorithm \"%s\"; known:",
                                    name);
      for (int i = 0; i < n && off < errlen; i++)
        off += (size_t)snprintf(err + off, errlen - off, " %s", all[i].name);
      return BATON_EUSAGE;
    }
    if (!colon) {
      for (int c = 0; c < BATON__COLL_COUNT; c++)
        if (algo->colls & (1u << c))
          forced[c] = algo;
      continue;
    }
    *colon = '\0';
    baton__coll_t coll = baton__coll_find(item);
    if (coll == BATON__COLL_COUNT || coll == BATON__COLL_BARRIER) {
      snprintf(err, errlen, "BATON_ALGO: unknown collective \"%s\" in \"%s:%s\"", item, item,
               name);
      return BATON_EUSAGE;
    }
    forced[coll] = algo;
  }
  return BATON_OK;
}

const baton__algo_t *baton__select(baton_comm_t *comm, baton__coll_t coll, size_t count,
                                   size_t elsize) {
  static const baton__algo_t *flat, *ring;
  if (!flat)
    flat = baton__algo_find("flat"), ring = baton__algo_find("ring");
  const baton__algo_t *forced = comm->forced[coll];
  int flat_ok = (flat->colls & (1u << coll)) && baton__flat_fits(comm, coll, count, elsize);
  if (forced == flat && !flat_ok) {
    BATON_INFO(COLL, "%s: BATON_ALGO asks for flat, which needs every rank on one host and "
               "at most BATON_FLAT_BYTES per rank; using the next best",
               baton__coll_name(coll));
    forced = NULL;
  }
  if (forced)
    return forced;
  return flat_ok ? flat : ring;
}
