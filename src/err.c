/* err.c - error codes to text, generated from BATON_ERRNO_MAP in baton.h. */
#include "internal.h"

const char *baton_strerror(int rc) {
  switch (rc) {
  case BATON_OK:
    return "success";
#define XX(name, value, msg)                                                                       \
  case BATON_##name:                                                                               \
    return msg;
    BATON_ERRNO_MAP(XX)
#undef XX
  default:
    return "unknown error code";
  }
}

const char *baton_err_name(int rc) {
  switch (rc) {
  case BATON_OK:
    return "BATON_OK";
#define XX(name, value, msg)                                                                       \
  case BATON_##name:                                                                               \
    return "BATON_" #name;
    BATON_ERRNO_MAP(XX)
#undef XX
  default:
    return "BATON_UNKNOWN";
  }
}
