/*
 * train.c - data-parallel training with baton: logistic regression on a
 * synthetic data set, each rank on its shard, gradients averaged with
 * baton_allreduce(..., BATON_AVG).
 *
 *   build/bin/baton-run -n 4 build/examples/train [--samples N] [--steps S] [--lr LR] [--check]
 *
 * The data set. Sample i has D features uniform in [-1, 1) and a constant
 * 1 for the bias; its label is 1 when a fixed hidden weight vector, plus
 * noise, scores it above 0. Every number comes from a hash of its index, so
 * any rank makes any sample and the data set is the same whatever the rank
 * count. Rank r of n takes the samples [N*r/n, N*(r+1)/n).
 *
 * One step. The gradient of the mean log-loss over all N samples is
 * (1/N) * sum over i of (sigmoid(w.x_i) - y_i) x_i. Each rank sums its own
 * samples and scales the sum by n/N; the average of those n numbers over
 * the ranks (BATON_AVG) is then exactly the full gradient, even when the
 * shards differ in size. The loss rides in the same buffer, so each step
 * is one allreduce of D + 2 doubles. Rank 0 prints the loss as it goes.
 *
 * --check: rank 0 then trains again alone on the whole data set, without
 * baton, and compares the two weight vectors. They differ only by rounding
 * (the sums run in another order), and the tolerance is a bound on that
 * rounding, worked out in tolerance_step() below; the run fails if the
 * distance exceeds it, or if training did not lower the loss.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <baton.h>

#define D 16      /* features; weight D is the bias */
#define W (D + 1) /* weights */

typedef struct {
  size_t lo, hi; /* samples [lo, hi) */
  double *x;     /* (hi - lo) rows of W */
  double *y;
} shard_t;

/* splitmix64's finaliser: a counter-based generator, one number per key. */
static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [-1, 1) from key; stream tells features, weights and noise apart. */
static double uniform(uint64_t stream, uint64_t key) {
  return (double)(mix(mix(stream) + key) >> 11) * 0x1p-52 - 1.0;
}

static void make_sample(size_t i, double *x, double *y) {
  double score = 0.5 * uniform(3, i); /* noise */
  for (int j = 0; j < D; j++) {
    x[j] = uniform(1, (uint64_t)i * D + (uint64_t)j);
    score += x[j] * 2.0 * uniform(2, (uint64_t)j); /* hidden weights in [-2, 2) */
  }
  x[D] = 1.0;
  *y = score > 0 ? 1.0 : 0.0;
}

static int make_shard(shard_t *s, size_t lo, size_t hi) {
  s->lo = lo;
  s->hi = hi;
  s->x = malloc((hi - lo + 1) * W * sizeof(double));
  s->y = malloc((hi - lo + 1) * sizeof(double));
  if (!s->x || !s->y)
    return -1;
  for (size_t i = lo; i < hi; i++)
    make_sample(i, s->x + (i - lo) * W, s->y + (i - lo));
  return 0;
}

static double dot(const double *a, const double *b) {
  double s = 0;
  for (int j = 0; j < W; j++)
    s += a[j] * b[j];
  return s;
}

/* out[0..W) = scale * sum over the shard of the per-sample gradients, and
 * out[W] = scale * the sum of the per-sample losses log(1 + e^z) - y z. */
static void shard_gradient(const shard_t *s, const double *w, double scale, double *out) {
  memset(out, 0, (W + 1) * sizeof(double));
  for (size_t i = 0; i < s->hi - s->lo; i++) {
    const double *x = s->x + i * W;
    double z = dot(w, x), y = s->y[i];
    double p = z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z));
    for (int j = 0; j < W; j++)
      out[j] += (p - y) * x[j];
    out[W] += (z > 0 ? z + log1p(exp(-z)) : log1p(exp(z))) - y * z;
  }
  for (int j = 0; j <= W; j++)
    out[j] *= scale;
}

static double gamma_n(double k) { /* Higham's gamma_k = k u / (1 - k u) */
  double ku = k * DBL_EPSILON / 2;
  return ku / (1 - ku);
}

/*
 * The tolerance. Let T(w) = w - lr * grad f(w) be one exact step. f is
 * convex and L-smooth with L <= (mean of |x_i|^2) / 4 (the trace bounds the
 * largest eigenvalue), so for lr <= 2 / L the map T does not stretch
 * distances (|T(a) - T(b)| <= |a - b|, 2-norm). Each computed step equals T
 * plus a rounding error rho; then after S steps
 *   |w_parallel - w_serial| <= sum over steps of (rho_parallel + rho_serial).
 * Per weight j, with A_j = sum_i |g_ij| and M_i = sum_k |w_k x_ik|:
 *  - summing N per-sample terms in any order, scaling by n/N, summing n
 *    ranks and dividing by n: at most gamma(N + n + 4) A_j / N;
 *  - each per-sample term: z = w.x_i is off by gamma(W) M_i, sigmoid'
 *    <= 1/4, exp and the divisions add a few u: |x_ij| (gamma(W+1) M_i / 4
 *    + 8u) per sample, / N;
 *  - the update w_j - lr g_j: u |lr g_j| + u |w_j new|.
 * rho is the 2-norm of lr * (the first two) + the third. This returns it for
 * one step at w (before the update), evaluated on the whole data; the
 * parallel run's rho is the same expression at an iterate within the
 * tolerance of this one, so the sum counts 2 rho per step and then doubles
 * once more for the second-order terms left out.
 */
static double tolerance_step(const shard_t *all, const double *w, const double *g, double lr,
                             int nranks) {
  double a[W] = {0}, e[W] = {0}, u = DBL_EPSILON / 2, n = (double)(all->hi - all->lo);
  for (size_t i = 0; i < all->hi - all->lo; i++) {
    const double *x = all->x + i * W;
    double z = dot(w, x), m = 0;
    for (int k = 0; k < W; k++)
      m += fabs(w[k] * x[k]);
    double r = fabs((z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z))) - all->y[i]);
    for (int j = 0; j < W; j++) {
      a[j] += r * fabs(x[j]);
      e[j] += fabs(x[j]) * (gamma_n(W + 1) * m / 4 + 8 * u);
    }
  }
  double rho2 = 0;
  for (int j = 0; j < W; j++) {
    double wnew = w[j] - lr * g[j];
    double rho =
        lr * (gamma_n(n + nranks + 4) * a[j] + e[j]) / n + u * fabs(lr * g[j]) + u * fabs(wnew);
    rho2 += rho * rho;
  }
  return 2 * 2 * sqrt(rho2);
}

/* lr above 2 / L voids the bound; L from the mean squared norm of x. */
static double lr_limit(const shard_t *all) {
  double sq = 0;
  for (size_t i = 0; i < (all->hi - all->lo) * W; i++)
    sq += all->x[i] * all->x[i];
  return 2 / (sq / (double)(all->hi - all->lo) / 4);
}

/* Trains w (zeroed first) on the whole data set alone; returns the
 * rounding tolerance accumulated along the way and the last loss. */
static double train_serial(const shard_t *all, int steps, double lr, int nranks, double *w,
                           double *loss) {
  double g[W + 1], tol = 0;
  memset(w, 0, W * sizeof(double));
  for (int t = 0; t < steps; t++) {
    shard_gradient(all, w, 1 / (double)(all->hi - all->lo), g);
    tol += tolerance_step(all, w, g, lr, nranks);
    for (int j = 0; j < W; j++)
      w[j] -= lr * g[j];
    *loss = g[W];
  }
  return tol;
}

/* Rank 0's --check: returns 0 when the parallel weights pass. */
static int check(size_t samples, int steps, double lr, int nranks, const double *w_par,
                 double first_loss) {
  shard_t all;
  double w[W], loss = 0, dist2 = 0;
  if (make_shard(&all, 0, samples) != 0) {
    fprintf(stderr, "check: out of memory for %zu samples\n", samples);
    return 1;
  }
  double limit = lr_limit(&all);
  double tol = train_serial(&all, steps, lr, nranks, w, &loss);
  for (int j = 0; j < W; j++)
    dist2 += (w_par[j] - w[j]) * (w_par[j] - w[j]);
  free(all.x);
  free(all.y);
  printf("check: |w(%d ranks) - w(1 process)| = %.3g, tolerance %.3g; loss %.6f -> %.6f\n", nranks,
         sqrt(dist2), tol, first_loss, loss);
  if (lr > limit) {
    printf("check: FAIL: lr %g is above 2/L = %g, where the tolerance does not hold\n", lr, limit);
    return 1;
  }
  int ok = sqrt(dist2) <= tol && loss < first_loss;
  printf("check: %s\n", ok ? "PASS" : "FAIL");
  return !ok;
}

int main(int argc, char **argv) {
  size_t samples = 20000;
  int steps = 100, do_check = 0;
  double lr = 1.0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--check"))
      do_check = 1;
    else if (!strcmp(argv[i], "--samples") && i + 1 < argc)
      samples = strtoul(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
      steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--lr") && i + 1 < argc)
      lr = atof(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--samples N] [--steps S] [--lr LR] [--check]\n", argv[0]);
      return 2;
    }
  }
  if (samples == 0 || steps <= 0 || !(lr > 0)) {
    fprintf(stderr, "train: --samples, --steps and --lr must be positive\n");
    return 2;
  }

  baton_comm_t *comm;
  int rc = baton_comm_init(&comm);
  if (rc != BATON_OK) {
    fprintf(stderr, "baton_comm_init: %s: %s\n", baton_strerror(rc), baton_last_init_error());
    return 1;
  }
  int rank = baton_comm_rank(comm), size = baton_comm_size(comm);
  shard_t mine;
  if (make_shard(&mine, samples * (size_t)rank / (size_t)size,
                 samples * (size_t)(rank + 1) / (size_t)size) != 0) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    return 1;
  }

  double w[W] = {0}, buf[W + 1], first_loss = 0;
  for (int t = 0; t < steps && rc == BATON_OK; t++) {
    shard_gradient(&mine, w, (double)size / (double)samples, buf);
    rc = baton_allreduce(buf, buf, W + 1, BATON_FLOAT64, BATON_AVG, comm);
    for (int j = 0; j < W; j++)
      w[j] -= lr * buf[j];
    if (t == 0)
      first_loss = buf[W];
    if (rank == 0 && (t % 10 == 0 || t == steps - 1))
      printf("step %4d  loss %.6f\n", t, buf[W]);
  }
  if (rc != BATON_OK)
    fprintf(stderr, "rank %d: allreduce: %s: %s\n", rank, baton_strerror(rc),
            baton_comm_last_error(comm));
  int failed = rc != BATON_OK;
  if (!failed && rank == 0) {
    printf("weights:");
    for (int j = 0; j < W; j++)
      printf(" %.4f", w[j]);
    printf("\n");
    if (do_check)
      failed = check(samples, steps, lr, size, w, first_loss);
  }
  free(mine.x);
  free(mine.y);
  baton_comm_destroy(comm);
  return failed;
}
