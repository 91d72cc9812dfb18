/*
 * baton-run - starts N ranks of a program on this host.
 *
 *   baton-run -n N [--tag-output] [--timeout S] [--bind cpu] [--] prog [args...]
 *   baton-run -n N --ppn P --host-cmd CMD [--addr HOST[:PORT]] ... prog ...
 *
 * Each rank gets BATON_RANK, BATON_SIZE, BATON_LOCAL_RANK, BATON_LOCAL_SIZE
 * and BATON_ADDR=127.0.0.1:PORT, where PORT was free a moment before the
 * ranks start; rank 0 serves the rendezvous store there. Unless BATON_SECRET
 * is already set, the launcher makes a fresh random one for the job, so that
 * only its own ranks can join. For torch.distributed's env:// it also sets
 * RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, and MASTER_ADDR (host
 * 0's address) with MASTER_PORT (another port that was free) unless they
 * are set already. The launcher holds no collective logic and uses no
 * library code.
 *
 * The second form spreads the ranks over hosts: rank r runs on host r / P
 * through the command prefix CMD with %h replaced by the host's index (for
 * the emulated cluster, "ip netns exec baton-h%h"; it could as well be an
 * ssh command), and BATON_ADDR names HOST, which must be host 0's address.
 * The prefix must exec the program in the end, so that signals still reach
 * it; everything else (output, failures, signals) works as on one host.
 *
 * --bind cpu pins rank r to one of the C logical CPUs the launcher may use
 * (its own affinity, so taskset and cpusets narrow it): the (r * C / N)-th,
 * so that consecutive ranks share a CPU when there are more ranks than
 * CPUs, and every rank keeps the CPU it starts on; the launcher says which rank
 * runs where on stderr. Unbound, the scheduler places them and may move
 * them.
 *
 * The ranks share one process group of their own, so that a signal reaches
 * everything they started, and nothing is left behind. Only rank 0 reads the
 * launcher's stdin, and only when it is not a terminal (a background group
 * that reads the terminal is stopped); the others read /dev/null. When a rank fails the
 * launcher says which, stops the others (SIGTERM, then SIGKILL after a grace
 * period) and exits with that rank's status, 128 + signal for a signal.
 * SIGINT, SIGTERM and SIGHUP are forwarded to the ranks.
 *
 * One poll() loop watches a signalfd (children exiting, signals to forward)
 * and, with --tag-output, a stdout and a stderr pipe per rank whose lines it
 * prefixes with "[rank] ". Partial lines wait for their newline or for EOF.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 1024
#define GRACE_S 2.0              /* from SIGTERM to SIGKILL when stopping the ranks */
#define DRAIN_S 1.0              /* how long output may trail the last rank's exit */
#define LINE_MAX_BYTES (1 << 20) /* a longer line is printed in pieces */

typedef struct {
  int fd, out, rank; /* read end, where its lines go (1 or 2), whose */
  int mid_line;      /* a piece of an over-long line went out unprefixed */
  char *buf;
  size_t len, cap;
} stream_t;

/* Where the ranks run: rank r on host r / ppn, started through host_cmd
 * with %h replaced by the host index. */
typedef struct {
  int ppn;              /* ranks per host; 0: all on this host */
  const char *host_cmd; /* command prefix; NULL: run the program directly */
  const char *addr;     /* rendezvous host[:port]; NULL: 127.0.0.1 */
} hosts_t;

typedef struct {
  int n, tag;
  int bind;  /* --bind cpu */
  int *cpus; /* with it: the CPUs the launcher may use, in order */
  int ncpus;
  hosts_t hosts;
  double timeout_s; /* 0: no limit */
  char **argv;      /* the program and its arguments */
  pid_t *pids;      /* 0 once reaped */
  pid_t pgid;
  int alive;
  stream_t *streams; /* 2 per rank with --tag-output */
  int nstreams, open_streams;
  int sfd; /* signalfd */
  sigset_t oldmask;
  struct rlimit oldlim;
  int stopping; /* SIGTERM sent; SIGKILL at kill_at */
  int signals;  /* how many SIGINT/SIGTERM/SIGHUP we got */
  double kill_at;
  int status; /* the exit status of the launcher */
} job_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: baton-run -n N [--tag-output] [--timeout S] [--bind cpu] [--] prog [args...]\n"
          "  -n N           number of ranks, 1..%d\n"
          "  --tag-output   prefix each line of rank r's stdout and stderr with \"[r] \"\n"
          "  --timeout S    stop the ranks after S seconds and exit 124\n"
          "  --bind cpu     pin rank r to CPU r*C/N of the C logical CPUs this launcher\n"
          "                 may use (consecutive ranks together); default none: unpinned\n"
          "  --ppn P        ranks per host: rank r runs on host r/P (default: all on one)\n"
          "  --host-cmd CMD run each rank through CMD, words split at spaces, %%h the\n"
          "                 host index, %%%% a %% (e.g. \"ip netns exec baton-h%%h\")\n"
          "  --addr H[:P]   rendezvous address (host 0's), port picked when left out\n"
          "  --help         this text\n"
          "Each rank gets BATON_RANK, BATON_SIZE, BATON_LOCAL_RANK, BATON_LOCAL_SIZE\n"
          "and BATON_ADDR=127.0.0.1:PORT in its environment, and BATON_SECRET, a fresh\n"
          "random secret for the job unless BATON_SECRET is set already. For\n"
          "torch.distributed's env:// it also gets RANK, WORLD_SIZE, LOCAL_RANK,\n"
          "LOCAL_WORLD_SIZE, and MASTER_ADDR and MASTER_PORT (a second free port)\n"
          "unless those two are set already.\n",
          MAX_RANKS);
}

__attribute__((format(printf, 1, 2), noreturn)) static void die_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "baton-run: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  usage(stderr);
  exit(2);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --ppn, --host-cmd and --addr; returns 0 when c is none of them. */
static int parse_hosts_option(int c, const char *arg, hosts_t *h) {
  char *end;
  if (c == 'P') {
    long v = strtol(arg, &end, 10);
    if (*arg == '\0' || *end || v < 1 || v > MAX_RANKS)
      die_usage("--ppn wants a number of ranks per host in 1..%d, not \"%s\"", MAX_RANKS, arg);
    h->ppn = (int)v;
  } else if (c == 'H') {
    if (strspn(arg, " ") == strlen(arg))
      die_usage("--host-cmd wants a command, not \"%s\"", arg);
    h->host_cmd = arg;
  } else if (c == 'A') {
    const char *colon = arg[0] == '[' ? strstr(arg, "]:") : strrchr(arg, ':');
    const char *port = colon ? colon + 1 + (arg[0] == '[') : NULL;
    long v = port ? strtol(port, &end, 10) : 1;
    if (*arg == '\0' || *arg == ':' || strlen(arg) > 200 || (port && (*port == '\0' || *end)) ||
        v < 1 || v > 65535)
      die_usage("--addr wants HOST or HOST:PORT (PORT in 1..65535), not \"%s\"", arg);
    h->addr = arg;
  } else {
    return 0;
  }
  return 1;
}

static void parse_args(int argc, char **argv, job_t *job) {
  static const struct option longs[] = {
      {"tag-output", no_argument, NULL, 't'},     {"timeout", required_argument, NULL, 'T'},
      {"help", no_argument, NULL, 'h'},           {"ppn", required_argument, NULL, 'P'},
      {"host-cmd", required_argument, NULL, 'H'}, {"addr", required_argument, NULL, 'A'},
      {"bind", required_argument, NULL, 'B'},     {NULL, 0, NULL, 0}};
  char *end;
  int c;
  while ((c = getopt_long(argc, argv, "+n:h", longs, NULL)) != -1) {
    if (c == 'n') {
      long v = strtol(optarg, &end, 10);
      if (*optarg == '\0' || *end || v < 1 || v > MAX_RANKS)
        die_usage("-n wants a number of ranks in 1..1024, not \"%s\"", optarg);
      job->n = (int)v;
    } else if (c == 'T') {
      job->timeout_s = strtod(optarg, &end);
      if (*optarg == '\0' || *end || !(job->timeout_s > 0))
        die_usage("--timeout wants a number of seconds > 0, not \"%s\"", optarg);
    } else if (c == 't') {
      job->tag = 1;
    } else if (c == 'B') {
      if (strcmp(optarg, "cpu") && strcmp(optarg, "none"))
        die_usage("--bind wants cpu or none, not \"%s\"", optarg);
      job->bind = !strcmp(optarg, "cpu");
    } else if (c == 'h') {
      usage(stdout);
      exit(0);
    } else if (parse_hosts_option(c, optarg, &job->hosts)) {
      continue;
    } else {
      die_usage("bad option");
    }
  }
  if (job->n == 0)
    die_usage("missing -n N");
  if (optind >= argc)
    die_usage("no program to run");
  if (job->bind && job->hosts.host_cmd)
    die_usage("--bind cpu pins the ranks this launcher runs itself; through --host-cmd "
              "the command on each host must place them");
  job->argv = argv + optind;
}

/* --bind cpu: the CPUs this process may run on, and which rank goes
 * where, said once on stderr ("ranks 0-1 on cpu 0, ranks 2-3 on cpu 1"). */
static int cpu_of(const job_t *job, int rank) {
  return job->cpus[(long)rank * job->ncpus / job->n];
}

static void plan_binding(job_t *job) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    fprintf(stderr, "baton-run: --bind cpu: cannot read this process's CPUs: %s\n",
            strerror(errno));
    exit(1);
  }
  job->cpus = calloc(CPU_SETSIZE, sizeof *job->cpus);
  if (!job->cpus) {
    perror("baton-run");
    exit(1);
  }
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set))
      job->cpus[job->ncpus++] = c;
  fprintf(stderr, "baton-run: --bind cpu:");
  for (int r = 0; r < job->n;) {
    int last = r;
    while (last + 1 < job->n && cpu_of(job, last + 1) == cpu_of(job, r))
      last++;
    if (last > r)
      fprintf(stderr, "%s ranks %d-%d on cpu %d", r ? "," : "", r, last, cpu_of(job, r));
    else
      fprintf(stderr, "%s rank %d on cpu %d", r ? "," : "", r, cpu_of(job, r));
    r = last + 1;
  }
  fprintf(stderr, "\n");
}

/* A port on 127.0.0.1 (any: on every address) that was free a moment ago. */
static int pick_port(int any) {
  struct sockaddr_in sa = {.sin_family = AF_INET};
  socklen_t len = sizeof sa;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sa.sin_addr.s_addr = htonl(any ? INADDR_ANY : INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
    fprintf(stderr, "baton-run: cannot find a free port: %s\n", strerror(errno));
    exit(1);
  }
  close(fd);
  return ntohs(sa.sin_port);
}

/* BATON_SECRET for the ranks: 32 random bytes as hex, unless the user set
 * one (to let processes started elsewhere join). */
static void make_secret(void) {
  unsigned char key[32];
  char hex[2 * sizeof key + 1];
  const char *set = getenv("BATON_SECRET");
  if (set && *set)
    return;
  if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key) {
    fprintf(stderr, "baton-run: cannot make a secret for the job: %s\n", strerror(errno));
    exit(1);
  }
  for (size_t i = 0; i < sizeof key; i++)
    snprintf(hex + 2 * i, 3, "%02x", key[i]);
  setenv("BATON_SECRET", hex, 1);
}

static void set_env_int(const char *name, int v) {
  char s[16];
  snprintf(s, sizeof s, "%d", v);
  setenv(name, s, 1);
}

/* BATON_ADDR: --addr as given, or its host with a port that was free here
 * (on another host it can only be hoped free; a fresh namespace has all),
 * or 127.0.0.1 with a free port. */
static void make_addr(const hosts_t *h, char *addr, size_t len) {
  const char *a = h->addr;
  if (!a)
    snprintf(addr, len, "127.0.0.1:%d", pick_port(0));
  else if (a[0] == '[' ? strstr(a, "]:") != NULL : strchr(a, ':') != NULL)
    snprintf(addr, len, "%s", a);
  else
    snprintf(addr, len, "%s:%d", a, pick_port(1));
}

/* What the ranks exec first, for errors: the program, or --host-cmd's. */
static const char *first_program(const job_t *job, char *buf, size_t len) {
  const char *cmd = job->hosts.host_cmd;
  if (!cmd)
    return job->argv[0];
  cmd += strspn(cmd, " ");
  snprintf(buf, len, "%.*s", (int)strcspn(cmd, " "), cmd);
  return buf;
}

/* In the child: the host-local rank and size, in baton's names and in
 * torchrun's (env://). */
static void set_local_env(const job_t *job, int rank) {
  int ppn = job->hosts.ppn ? job->hosts.ppn : job->n;
  int first = rank / ppn * ppn;
  int local = rank - first, nlocal = job->n - first < ppn ? job->n - first : ppn;
  set_env_int("BATON_LOCAL_RANK", local);
  set_env_int("BATON_LOCAL_SIZE", nlocal);
  set_env_int("RANK", rank);
  set_env_int("WORLD_SIZE", job->n);
  set_env_int("LOCAL_RANK", local);
  set_env_int("LOCAL_WORLD_SIZE", nlocal);
}

/* MASTER_ADDR and MASTER_PORT for env://, unless the user set them: the
 * host of addr, and a port other than addr's, where torch.distributed's
 * store can listen beside baton's. */
static void set_master_env(const hosts_t *h, const char *addr) {
  char host[256], port[16];
  const char *colon = strrchr(addr, ':');
  size_t n = colon ? (size_t)(colon - addr) : strlen(addr);
  if (addr[0] == '[' && n >= 2) /* [v6]:port */
    addr++, n -= 2;
  snprintf(host, sizeof host, "%.*s", (int)n, addr);
  if (!getenv("MASTER_ADDR"))
    setenv("MASTER_ADDR", host, 1);
  if (!getenv("MASTER_PORT")) {
    int p, baton_port = colon ? atoi(colon + 1) : 0;
    while ((p = pick_port(h->addr != NULL)) == baton_port)
      ;
    snprintf(port, sizeof port, "%d", p);
    setenv("MASTER_PORT", port, 1);
  }
}

/* In the child: execs the program, through --host-cmd when given, with
 * every %h of it replaced by the rank's host (and %% by %). Returns only on
 * failure. */
static void exec_rank(const job_t *job, int rank) {
  if (!job->hosts.host_cmd) {
    execvp(job->argv[0], job->argv);
    return;
  }
  int ppn = job->hosts.ppn ? job->hosts.ppn : job->n, nargs = 0, nwords = 0;
  char host[16], *words = malloc(strlen(job->hosts.host_cmd) * 8 + 1);
  snprintf(host, sizeof host, "%d", rank / ppn);
  while (job->argv[nargs])
    nargs++;
  char **argv = calloc(strlen(job->hosts.host_cmd) + (size_t)nargs + 1, sizeof *argv);
  if (!words || !argv)
    return;
  char *w = words;
  for (const char *p = job->hosts.host_cmd; *p;) {
    if (*p == ' ') {
      p++;
      continue;
    }
    argv[nwords++] = w;
    for (; *p && *p != ' '; p++) {
      if (p[0] == '%' && p[1] == 'h')
        w += sprintf(w, "%s", host), p++;
      else if (p[0] == '%' && p[1] == '%')
        *w++ = *p++;
      else
        *w++ = *p;
    }
    *w++ = '\0';
  }
  memcpy(argv + nwords, job->argv, (size_t)nargs * sizeof *argv);
  execvp(argv[0], argv);
}

/* In the child: environment, output pipes, then exec. On failure writes errno
 * to report (close-on-exec, so the parent reads EOF when exec works). */
static void child_exec(job_t *job, int rank, const char *addr, int out[2], int report) {
  setpgid(0, job->pgid);
  signal(SIGPIPE, SIG_DFL);
  sigprocmask(SIG_SETMASK, &job->oldmask, NULL);
  setrlimit(RLIMIT_NOFILE, &job->oldlim);
  if (job->tag && (dup2(out[0], 1) < 0 || dup2(out[1], 2) < 0))
    goto fail;
  if (rank > 0 || isatty(0)) { /* a tty read from outside its group stops it */
    int null = open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, 0) < 0)
      goto fail;
    close(null);
  }
  set_env_int("BATON_RANK", rank);
  set_env_int("BATON_SIZE", job->n);
  set_local_env(job, rank);
  setenv("BATON_ADDR", addr, 1);
  if (job->bind) { /* before exec: every thread the program makes inherits it */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu_of(job, rank), &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
      int e = errno;
      fprintf(stderr, "baton-run: rank %d: cannot pin it to cpu %d: %s\n", rank, cpu_of(job, rank),
              strerror(e));
      errno = e;
      goto fail;
    }
  }
  exec_rank(job, rank);
fail:;
  int e = errno;
  ssize_t w = write(report, &e, sizeof e);
  (void)w;
  _exit(127);
}

static void add_stream(job_t *job, int fd, int out, int rank) {
  job->streams[job->nstreams++] = (stream_t){.fd = fd, .out = out, .rank = rank};
  job->open_streams++;
}

/* Starts rank r; on an exec failure returns that errno, else 0. */
static int spawn(job_t *job, int r, const char *addr) {
  int report[2], pout[2] = {-1, -1}, perr[2] = {-1, -1}, e = 0;
  if (pipe2(report, O_CLOEXEC) != 0 ||
      (job->tag && (pipe2(pout, O_CLOEXEC) != 0 || pipe2(perr, O_CLOEXEC) != 0))) {
    fprintf(stderr, "baton-run: pipe: %s\n", strerror(errno));
    return errno;
  }
  pid_t pid = fork();
  if (pid == 0)
    child_exec(job, r, addr, (int[2]){pout[1], perr[1]}, report[1]);
  if (pid < 0) {
    fprintf(stderr, "baton-run: fork: %s\n", strerror(errno));
    return errno;
  }
  if (!job->pgid)
    job->pgid = pid;       /* rank 0 leads the group */
  setpgid(pid, job->pgid); /* both sides call it: no race with exec */
  job->pids[r] = pid;
  job->alive++;
  close(report[1]);
  if (read(report[0], &e, sizeof e) != sizeof e)
    e = 0; /* EOF: exec worked */
  close(report[0]);
  if (job->tag) {
    close(pout[1]);
    close(perr[1]);
    add_stream(job, pout[0], 1, r);
    add_stream(job, perr[0], 2, r);
  }
  return e;
}

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return; /* our own output is gone (EPIPE): drop it */
    p += w, n -= (size_t)w;
  }
}

/* Prints the complete lines in s->buf with the rank's prefix; at EOF or
 * with a full buffer the rest too. */
static void stream_flush(stream_t *s, int all) {
  char prefix[16];
  int plen = snprintf(prefix, sizeof prefix, "[%d] ", s->rank);
  size_t start = 0;
  for (size_t i = 0; i < s->len; i++) {
    if (s->buf[i] != '\n')
      continue;
    if (!s->mid_line)
      write_all(s->out, prefix, (size_t)plen);
    write_all(s->out, s->buf + start, i + 1 - start);
    start = i + 1;
    s->mid_line = 0;
  }
  if (all && start < s->len) {
    if (!s->mid_line)
      write_all(s->out, prefix, (size_t)plen);
    write_all(s->out, s->buf + start, s->len - start);
    s->mid_line = 1;
    start = s->len;
  }
  memmove(s->buf, s->buf + start, s->len - start);
  s->len -= start;
}

static void stream_read(job_t *job, stream_t *s) {
  if (s->cap - s->len < 4096 && s->cap < LINE_MAX_BYTES) {
    size_t cap = s->cap ? 2 * s->cap : 4096;
    char *buf = realloc(s->buf, cap);
    if (!buf) {
      perror("baton-run");
      exit(1);
    }
    s->buf = buf, s->cap = cap;
  }
  ssize_t r = read(s->fd, s->buf + s->len, s->cap - s->len);
  if (r < 0 && errno == EINTR)
    return;
  if (r <= 0) { /* EOF: the rest goes out, ended by a newline */
    stream_flush(s, 1);
    if (s->mid_line)
      write_all(s->out, "\n", 1);
    close(s->fd);
    free(s->buf);
    s->fd = -1, s->buf = NULL;
    job->open_streams--;
    return;
  }
  s->len += (size_t)r;
  stream_flush(s, s->len == s->cap && s->cap >= LINE_MAX_BYTES);
}

/* Signals every process of the job while the group still has a member we
 * have not reaped, so that the group id cannot belong to anyone else. */
static void signal_all(job_t *job, int sig) {
  if (job->alive > 0 && job->pgid > 0)
    kill(-job->pgid, sig);
}

static void stop_all(job_t *job) {
  if (job->stopping)
    return;
  job->stopping = 1;
  job->kill_at = now() + GRACE_S;
  signal_all(job, SIGTERM);
}

static int rank_of(const job_t *job, pid_t pid) {
  for (int r = 0; r < job->n; r++)
    if (job->pids[r] == pid)
      return r;
  return -1;
}

/* The first rank to fail decides the launcher's status and stops the rest. */
static void rank_exited(job_t *job, int r, pid_t pid, int ws) {
  int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  if (code == 0 || job->stopping)
    return;
  job->status = code;
  /* One write, so that no rank's output lands inside the message. */
  char how[96], rest[64] = "";
  if (WIFEXITED(ws))
    snprintf(how, sizeof how, "exited with status %d", code);
  else
    snprintf(how, sizeof how, "killed by signal %d (%s)", WTERMSIG(ws), strsignal(WTERMSIG(ws)));
  if (job->alive > 0)
    snprintf(rest, sizeof rest, "; stopping the other %d rank%s", job->alive,
             job->alive > 1 ? "s" : "");
  dprintf(2, "baton-run: rank %d (pid %d) %s%s\n", r, (int)pid, how, rest);
  stop_all(job);
}

static void reap(job_t *job) {
  int ws;
  pid_t pid;
  while ((pid = waitpid(-1, &ws, WNOHANG)) > 0) {
    int r = rank_of(job, pid);
    if (r < 0)
      continue;
    job->pids[r] = 0;
    job->alive--;
    if (job->alive == 0 && job->stopping)
      kill(-job->pgid, SIGKILL); /* what the ranks left behind, if any */
    rank_exited(job, r, pid, ws);
  }
}

static void on_signal(job_t *job) {
  struct signalfd_siginfo si;
  while (read(job->sfd, &si, sizeof si) == sizeof si) {
    int sig = (int)si.ssi_signo;
    if (sig == SIGCHLD)
      continue;
    if (job->signals++ > 0) {
      signal_all(job, SIGKILL); /* asked twice: no more grace */
      continue;
    }
    fprintf(stderr, "baton-run: got %s; forwarding it to %d rank%s\n", strsignal(sig), job->alive,
            job->alive == 1 ? "" : "s");
    signal_all(job, sig);
    if (!job->stopping)
      job->status = 128 + sig;
    job->stopping = 1;
    job->kill_at = now() + GRACE_S;
  }
  reap(job);
}

/* The next poll timeout in ms: the grace period, the job limit or the drain. */
static int next_timeout(const job_t *job, double t0, double drain_at) {
  double t = 1e9, tnow = now();
  if (job->stopping && job->kill_at > 0)
    t = job->kill_at;
  if (!job->stopping && job->timeout_s > 0 && t0 + job->timeout_s < t)
    t = t0 + job->timeout_s;
  if (job->alive == 0 && drain_at < t)
    t = drain_at;
  return t - tnow <= 0 ? 0 : t - tnow > 3600 ? 3600000 : (int)((t - tnow) * 1000) + 1;
}

static void check_clocks(job_t *job, double t0) {
  double t = now();
  if (!job->stopping && job->timeout_s > 0 && t >= t0 + job->timeout_s) {
    fprintf(stderr, "baton-run: timed out after %g s; stopping %d rank%s\n", job->timeout_s,
            job->alive, job->alive == 1 ? "" : "s");
    job->status = 124;
    stop_all(job);
  } else if (job->stopping && job->kill_at > 0 && t >= job->kill_at) {
    signal_all(job, SIGKILL);
    job->kill_at = 0;
  }
}

static void run(job_t *job) {
  struct pollfd *pfds = calloc((size_t)job->nstreams + 1, sizeof *pfds);
  double t0 = now(), drain_at = 0;
  if (!pfds) {
    perror("baton-run");
    exit(1);
  }
  while (job->alive > 0 || (job->open_streams > 0 && now() < drain_at)) {
    pfds[0] = (struct pollfd){.fd = job->sfd, .events = POLLIN};
    for (int i = 0; i < job->nstreams; i++)
      pfds[1 + i] = (struct pollfd){.fd = job->streams[i].fd, .events = POLLIN};
    int k = poll(pfds, (nfds_t)job->nstreams + 1, next_timeout(job, t0, drain_at));
    if (k < 0 && errno != EINTR) {
      perror("baton-run: poll");
      exit(1);
    }
    for (int i = 0; k > 0 && i < job->nstreams; i++)
      if (pfds[1 + i].revents)
        stream_read(job, &job->streams[i]);
    if (k > 0 && pfds[0].revents)
      on_signal(job);
    check_clocks(job, t0);
    if (job->alive == 0 && drain_at == 0)
      drain_at = now() + DRAIN_S;
  }
  for (int i = 0; i < job->nstreams; i++) /* held open by a straggler */
    if (job->streams[i].fd >= 0)
      stream_flush(&job->streams[i], 1);
  free(pfds);
}

/* Blocks the signals the loop reads from a signalfd, and raises the open
 * file limit when --tag-output needs two pipes per rank. */
static void setup(job_t *job) {
  sigset_t mask;
  struct rlimit lim;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD), sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM), sigaddset(&mask, SIGHUP);
  signal(SIGPIPE, SIG_IGN);
  if (sigprocmask(SIG_BLOCK, &mask, &job->oldmask) != 0 ||
      (job->sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
    perror("baton-run: signalfd");
    exit(1);
  }
  getrlimit(RLIMIT_NOFILE, &job->oldlim);
  lim = job->oldlim;
  if (job->tag && lim.rlim_cur < (rlim_t)(2 * job->n + 64) && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  job->pids = calloc((size_t)job->n, sizeof *job->pids);
  job->streams = calloc(2 * (size_t)job->n, sizeof *job->streams);
  if (!job->pids || !job->streams) {
    perror("baton-run");
    exit(1);
  }
}

int main(int argc, char **argv) {
  job_t job = {0};
  char addr[256];

  parse_args(argc, argv, &job);
  if (job.bind)
    plan_binding(&job);
  setup(&job);
  make_addr(&job.hosts, addr, sizeof addr);
  set_master_env(&job.hosts, addr);
  make_secret();
  for (int r = 0; r < job.n; r++) {
    int e = spawn(&job, r, addr);
    if (e == 0)
      continue;
    if (job.alive > 0 && job.pids[r] && waitpid(job.pids[r], NULL, 0) > 0)
      job.pids[r] = 0, job.alive--;
    char prog[256];
    fprintf(stderr, "baton-run: cannot run \"%s\" (rank %d): %s\n",
            first_program(&job, prog, sizeof prog), r, strerror(e));
    usage(stderr);
    stop_all(&job);
    job.status = 2;
    break;
  }
  run(&job);
  free(job.pids);
  free(job.streams);
  free(job.cpus);
  return job.status;
}
