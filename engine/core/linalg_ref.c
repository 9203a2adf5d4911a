/* core/linalg_ref.c: LU, Cholesky, Householder QR, Jacobi eigh and one-sided Jacobi SVD on
 * float64 row-major matrices (contract in linalg_ref.h). */
#include "linalg_ref.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SWEEPS 80

int ddpl_ref_lu(int64_t n, double *a, int64_t *piv, int *sign)
{
    int info = 0;
    *sign = 1;
    for (int64_t j = 0; j < n; j++) {
        int64_t p = j; /* partial pivoting: the largest |a_ij| at or below the diagonal */
        for (int64_t i = j + 1; i < n; i++)
            if (fabs(a[i * n + j]) > fabs(a[p * n + j])) p = i;
        piv[j] = p;
        if (p != j) {
            for (int64_t k = 0; k < n; k++) {
                double t = a[j * n + k];
                a[j * n + k] = a[p * n + k];
                a[p * n + k] = t;
            }
            *sign = -*sign;
        }
        double d = a[j * n + j];
        if (d == 0.0) {
            if (!info) info = (int)(j + 1); /* keep factoring, as LAPACK's getrf */
            continue;
        }
        for (int64_t i = j + 1; i < n; i++) {
            double l = a[i * n + j] /= d;
            if (l == 0.0) continue;
            for (int64_t k = j + 1; k < n; k++) a[i * n + k] -= l * a[j * n + k];
        }
    }
    return info;
}

void ddpl_ref_lu_solve(int64_t n, const double *lu, const int64_t *piv, int64_t nrhs, double *b)
{
    for (int64_t j = 0; j < n; j++) /* b := P b */
        if (piv[j] != j)
            for (int64_t c = 0; c < nrhs; c++) {
                double t = b[j * nrhs + c];
                b[j * nrhs + c] = b[piv[j] * nrhs + c];
                b[piv[j] * nrhs + c] = t;
            }
    for (int64_t i = 0; i < n; i++) /* L y = P b, unit diagonal */
        for (int64_t k = 0; k < i; k++) {
            double l = lu[i * n + k];
            if (l != 0.0)
                for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] -= l * b[k * nrhs + c];
        }
    for (int64_t i = n - 1; i >= 0; i--) { /* U x = y */
        for (int64_t k = i + 1; k < n; k++) {
            double u = lu[i * n + k];
            if (u != 0.0)
                for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] -= u * b[k * nrhs + c];
        }
        double d = lu[i * n + i];
        for (int64_t c = 0; c < nrhs; c++) b[i * nrhs + c] /= d;
    }
}

int ddpl_ref_cholesky(int64_t n, double *a)
{
    for (int64_t j = 0; j < n; j++) {
        double d = a[j * n + j];
        for (int64_t k = 0; k < j; k++) d -= a[j * n + k] * a[j * n + k];
        /* a NaN pivot is not a verdict on definiteness: it propagates, as PyTorch's (OpenBLAS's
         * potrf) does, and the caller sees NaN in the factor */
        if (d <= 0.0) return (int)(j + 1);
        d = sqrt(d);
        a[j * n + j] = d;
        for (int64_t i = j + 1; i < n; i++) {
            double s = a[i * n + j];
            for (int64_t k = 0; k < j; k++) s -= a[i * n + k] * a[j * n + k];
            a[i * n + j] = s / d;
        }
        for (int64_t k = j + 1; k < n; k++) a[j * n + k] = 0.0;
    }
    return 0;
}

int ddpl_ref_qr(int64_t m, int64_t n, double *a, double *q, int64_t qc, double *r)
{
    int64_t k = m < n ? m : n;
    double tau_buf[64], *tau = k <= 64 ? tau_buf : malloc((size_t)k * sizeof *tau);
    if (!tau) return -1;
    /* LAPACK's dgeqrf convention: H_j = I - tau v v^T with v_j = 1 kept below the diagonal of
     * column j, beta = -sign(alpha) ||x||, so R's diagonal may be negative as PyTorch's. */
    for (int64_t j = 0; j < k; j++) {
        double alpha = a[j * n + j], xn = 0.0;
        for (int64_t i = j + 1; i < m; i++) xn = hypot(xn, a[i * n + j]);
        if (xn == 0.0) {
            tau[j] = 0.0;
            continue;
        }
        double beta = -copysign(hypot(alpha, xn), alpha);
        tau[j] = (beta - alpha) / beta;
        double scale = 1.0 / (alpha - beta);
        for (int64_t i = j + 1; i < m; i++) a[i * n + j] *= scale;
        a[j * n + j] = beta;
        for (int64_t c = j + 1; c < n; c++) { /* apply H_j to the trailing columns */
            double s = a[j * n + c];
            for (int64_t i = j + 1; i < m; i++) s += a[i * n + j] * a[i * n + c];
            s *= tau[j];
            a[j * n + c] -= s;
            for (int64_t i = j + 1; i < m; i++) a[i * n + c] -= s * a[i * n + j];
        }
    }
    for (int64_t i = 0; i < qc; i++)
        for (int64_t c = 0; c < n; c++) r[i * n + c] = (i < m && c >= i) ? a[i * n + c] : 0.0;
    if (q) { /* Q = H_0 ... H_{k-1} I[:, :qc], applied right to left */
        for (int64_t i = 0; i < m; i++)
            for (int64_t c = 0; c < qc; c++) q[i * qc + c] = i == c ? 1.0 : 0.0;
        for (int64_t j = k - 1; j >= 0; j--) {
            if (tau[j] == 0.0) continue;
            for (int64_t c = j; c < qc; c++) {
                double s = q[j * qc + c];
                for (int64_t i = j + 1; i < m; i++) s += a[i * n + j] * q[i * qc + c];
                s *= tau[j];
                q[j * qc + c] -= s;
                for (int64_t i = j + 1; i < m; i++) q[i * qc + c] -= s * a[i * n + j];
            }
        }
    }
    if (tau != tau_buf) free(tau);
    return 0;
}

/* the rotation (c, s) that zeroes the off-diagonal of [[app, apq], [apq, aqq]] */
static void jacobi_rotation(double app, double aqq, double apq, double *c, double *s)
{
    double zeta = (aqq - app) / (2.0 * apq);
    double t = (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1.0 + zeta * zeta));
    if (!isfinite(zeta)) t = 0.5 / zeta; /* huge zeta: t ~ 1/(2 zeta) */
    *c = 1.0 / sqrt(1.0 + t * t);
    *s = t * *c;
}

/* Householder reduction of the symmetric v (n x n, overwritten by the orthogonal transform) to
 * tridiagonal form: diagonal d, subdiagonal e[1..n) (EISPACK's tred2, as in JAMA). */
static void tred2(int64_t n, double *v, double *d, double *e)
{
/* v is held column-major (V(i, j) at v[j*n + i]): the inner loops run down columns, so they
 * read contiguous memory; the symmetric input is its own transpose */
#define V(i, j) v[(j)*n + (i)]
    for (int64_t j = 0; j < n; j++) d[j] = V(n - 1, j);
    for (int64_t i = n - 1; i > 0; i--) {
        double scale = 0.0, h = 0.0;
        for (int64_t k = 0; k < i; k++) scale += fabs(d[k]);
        if (scale == 0.0) {
            e[i] = d[i - 1];
            for (int64_t j = 0; j < i; j++) {
                d[j] = V(i - 1, j);
                V(i, j) = 0.0;
                V(j, i) = 0.0;
            }
        } else {
            for (int64_t k = 0; k < i; k++) {
                d[k] /= scale;
                h += d[k] * d[k];
            }
            double f = d[i - 1], g = sqrt(h);
            if (f > 0) g = -g;
            e[i] = scale * g;
            h -= f * g;
            d[i - 1] = f - g;
            for (int64_t j = 0; j < i; j++) e[j] = 0.0;
            for (int64_t j = 0; j < i; j++) {
                f = d[j];
                V(j, i) = f;
                g = e[j] + V(j, j) * f;
                for (int64_t k = j + 1; k <= i - 1; k++) {
                    g += V(k, j) * d[k];
                    e[k] += V(k, j) * f;
                }
                e[j] = g;
            }
            f = 0.0;
            for (int64_t j = 0; j < i; j++) {
                e[j] /= h;
                f += e[j] * d[j];
            }
            double hh = f / (h + h);
            for (int64_t j = 0; j < i; j++) e[j] -= hh * d[j];
            for (int64_t j = 0; j < i; j++) {
                f = d[j];
                g = e[j];
                for (int64_t k = j; k <= i - 1; k++) V(k, j) -= f * e[k] + g * d[k];
                d[j] = V(i - 1, j);
                V(i, j) = 0.0;
            }
        }
        d[i] = h;
    }
    for (int64_t i = 0; i < n - 1; i++) { /* accumulate the transformations */
        V(n - 1, i) = V(i, i);
        V(i, i) = 1.0;
        double h = d[i + 1];
        if (h != 0.0) {
            for (int64_t k = 0; k <= i; k++) d[k] = V(k, i + 1) / h;
            for (int64_t j = 0; j <= i; j++) {
                double g = 0.0;
                for (int64_t k = 0; k <= i; k++) g += V(k, i + 1) * V(k, j);
                for (int64_t k = 0; k <= i; k++) V(k, j) -= g * d[k];
            }
        }
        for (int64_t k = 0; k <= i; k++) V(k, i + 1) = 0.0;
    }
    for (int64_t j = 0; j < n; j++) {
        d[j] = V(n - 1, j);
        V(n - 1, j) = 0.0;
    }
    V(n - 1, n - 1) = 1.0;
    e[0] = 0.0;
}

/* Implicit QL with shifts on the tridiagonal (d, e), rotating v's columns along (EISPACK's
 * tql2, as in JAMA). Returns 0, or -1 when an eigenvalue needs more than 60 iterations. */
static int tql2(int64_t n, double *v, double *d, double *e)
{
    for (int64_t i = 1; i < n; i++) e[i - 1] = e[i];
    e[n - 1] = 0.0;
    double f = 0.0, tst1 = 0.0;
    for (int64_t l = 0; l < n; l++) {
        tst1 = fmax(tst1, fabs(d[l]) + fabs(e[l]));
        int64_t m = l;
        while (m < n - 1 && fabs(e[m]) > DBL_EPSILON * tst1) m++;
        if (m > l) {
            int iter = 0;
            do {
                if (++iter > 60) return -1;
                double g = d[l];
                double p = (d[l + 1] - g) / (2.0 * e[l]);
                double r = hypot(p, 1.0);
                if (p < 0) r = -r;
                d[l] = e[l] / (p + r);
                d[l + 1] = e[l] * (p + r);
                double dl1 = d[l + 1], h = g - d[l];
                for (int64_t i = l + 2; i < n; i++) d[i] -= h;
                f += h;
                p = d[m];
                double c = 1.0, c2 = c, c3 = c, el1 = e[l + 1], s = 0.0, s2 = 0.0;
                for (int64_t i = m - 1; i >= l; i--) {
                    c3 = c2;
                    c2 = c;
                    s2 = s;
                    g = c * e[i];
                    h = c * p;
                    r = hypot(p, e[i]);
                    e[i + 1] = s * r;
                    s = e[i] / r;
                    c = p / r;
                    p = c * d[i] - s * g;
                    d[i + 1] = h + s * (c * g + s * d[i]);
                    for (int64_t k = 0; k < n; k++) {
                        h = V(k, i + 1);
                        V(k, i + 1) = s * V(k, i) + c * h;
                        V(k, i) = c * V(k, i) - s * h;
                    }
                }
                p = -s * s2 * c3 * el1 * e[l] / dl1;
                e[l] = s * p;
                d[l] = c * p;
            } while (fabs(e[l]) > DBL_EPSILON * tst1);
        }
        d[l] += f;
        e[l] = 0.0;
    }
    return 0;
#undef V
}

/* Tridiagonalisation + implicit QL rather than Jacobi: as accurate (to eps ||A||) and about
 * 30 times faster at n = 256, where cyclic Jacobi's column updates stride through memory. */
int ddpl_ref_eigh(int64_t n, double *a, double *w, double *v)
{
    if (n == 0) return 0;
    double *e = malloc((size_t)n * sizeof *e);
    double *vv = v ? v : malloc((size_t)(n * n) * sizeof *vv);
    if (!e || !vv) {
        free(e);
        if (!v) free(vv);
        return -2;
    }
    memcpy(vv, a, (size_t)(n * n) * sizeof *vv);
    tred2(n, vv, w, e);
    int rc = tql2(n, vv, w, e);
    for (int64_t i = 1; i < n; i++) /* insertion sort, ascending, moving columns along */
        for (int64_t j = i; j > 0 && w[j - 1] > w[j]; j--) {
            double t = w[j];
            w[j] = w[j - 1];
            w[j - 1] = t;
            for (int64_t k = 0; k < n; k++) { /* column-major: column j is contiguous */
                t = vv[j * n + k];
                vv[j * n + k] = vv[(j - 1) * n + k];
                vv[(j - 1) * n + k] = t;
            }
        }
    for (int64_t i = 0; i < n; i++) /* back to row-major */
        for (int64_t j = i + 1; j < n; j++) {
            double t = vv[i * n + j];
            vv[i * n + j] = vv[j * n + i];
            vv[j * n + i] = t;
        }
    free(e);
    if (!v) free(vv);
    return rc;
}

/* One-sided Jacobi on the m x n (m >= n) matrix held column by column in w (w[j*m + i]):
 * rotates column pairs until all are orthogonal; vc (n x n, column-major, may be NULL)
 * accumulates the rotations. Afterwards A = W V^T with W's columns orthogonal. */
static int hestenes(int64_t m, int64_t n, double *w, double *vc, double tiny)
{
    for (int sweep = 0; sweep < MAX_SWEEPS; sweep++) {
        bool rotated = false;
        for (int64_t p = 0; p < n - 1; p++)
            for (int64_t q = p + 1; q < n; q++) {
                double *wp = w + p * m, *wq = w + q * m, al = 0, be = 0, ga = 0;
                for (int64_t i = 0; i < m; i++) {
                    al += wp[i] * wp[i];
                    be += wq[i] * wq[i];
                    ga += wp[i] * wq[i];
                }
                /* orthogonal to round-off, or a column that is zero to round-off of A (its
                 * singular value is below eps^2 ||A||: rotating it only churns denormals) */
                if (ga == 0.0 || fabs(ga) <= DBL_EPSILON * sqrt(al) * sqrt(be) || al <= tiny ||
                    be <= tiny)
                    continue;
                rotated = true;
                double c, s;
                jacobi_rotation(al, be, ga, &c, &s);
                for (int64_t i = 0; i < m; i++) {
                    double x = wp[i], y = wq[i];
                    wp[i] = c * x - s * y;
                    wq[i] = s * x + c * y;
                }
                if (vc)
                    for (int64_t i = 0; i < n; i++) {
                        double x = vc[p * n + i], y = vc[q * n + i];
                        vc[p * n + i] = c * x - s * y;
                        vc[q * n + i] = s * x + c * y;
                    }
            }
        if (!rotated) return 0;
    }
    return -2;
}

/* SVD of the m x n (m >= n) matrix given column-major in w (overwritten): s (n), u (m x uc,
 * row-major, uc = n or m), v (n x n, row-major V, not V^T). */
static int svd_tall(int64_t m, int64_t n, double *w, double *u, int64_t uc, double *s, double *v)
{
    double *vc = NULL;
    if (u) {
        vc = calloc((size_t)(n * n), sizeof *vc);
        if (!vc) return -1;
        for (int64_t i = 0; i < n; i++) vc[i * n + i] = 1.0;
    }
    double fro = 0.0;
    for (int64_t i = 0; i < m * n; i++) fro += w[i] * w[i];
    double eps2 = DBL_EPSILON * DBL_EPSILON, tiny = fro * eps2 * eps2;
    int rc = hestenes(m, n, w, vc, tiny);
    int64_t *order = malloc((size_t)n * sizeof *order);
    if (!order) {
        free(vc);
        return -1;
    }
    for (int64_t j = 0; j < n; j++) {
        double nrm = 0.0;
        for (int64_t i = 0; i < m; i++) nrm = hypot(nrm, w[j * m + i]);
        s[j] = nrm;
        order[j] = j;
    }
    for (int64_t i = 1; i < n; i++) /* descending, stable */
        for (int64_t j = i; j > 0 && s[order[j - 1]] < s[order[j]]; j--) {
            int64_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    double *sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted) rc = -1;
    if (sorted) {
        for (int64_t j = 0; j < n; j++) sorted[j] = s[order[j]];
        memcpy(s, sorted, (size_t)n * sizeof *s);
        free(sorted);
    }
    if (u && rc != -1) {
        int64_t r = 0; /* columns with a non-zero singular value come first */
        for (int64_t j = 0; j < n; j++) {
            const double *col = w + order[j] * m;
            bool live = s[j] * s[j] > tiny; /* else its U column comes from the completion */
            if (live) r = j + 1;
            for (int64_t i = 0; i < m; i++) u[i * uc + j] = live ? col[i] / s[j] : 0.0;
            for (int64_t i = 0; i < n; i++) v[i * n + j] = vc[order[j] * n + i];
        }
        if (r < uc) { /* complete U with an orthonormal basis of span(U[:, :r])'s complement */
            double *ur = malloc((size_t)(m * (r ? r : 1)) * sizeof *ur);
            double *qf = malloc((size_t)(m * m) * sizeof *qf);
            double *rr = malloc((size_t)(m * (r ? r : 1)) * sizeof *rr);
            if (ur && qf && rr)
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < r; j++) ur[i * r + j] = u[i * uc + j];
            if (ur && qf && rr && ddpl_ref_qr(m, r, ur, qf, m, rr) == 0) {
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = r; j < uc; j++) u[i * uc + j] = qf[i * m + j];
            } else {
                rc = -1;
            }
            free(ur);
            free(qf);
            free(rr);
        }
    }
    free(order);
    free(vc);
    return rc;
}

int ddpl_ref_svd(int64_t m, int64_t n, const double *a, double *u, double *s, double *vt, bool full)
{
    bool tall = m >= n;
    int64_t M = tall ? m : n, N = tall ? n : m; /* work on A (tall) or A^T (wide) */
    double *w = malloc((size_t)(M * N) * sizeof *w);
    bool vecs = u && vt;
    int64_t uc = full ? M : N;
    double *uu = vecs ? malloc((size_t)(M * uc) * sizeof *uu) : NULL;
    double *vv = vecs ? malloc((size_t)(N * N) * sizeof *vv) : NULL;
    if (!w || (vecs && (!uu || !vv))) {
        free(w);
        free(uu);
        free(vv);
        return -1;
    }
    for (int64_t i = 0; i < m; i++) /* column-major copy of the tall one */
        for (int64_t j = 0; j < n; j++) {
            if (tall)
                w[j * m + i] = a[i * n + j];
            else
                w[i * n + j] = a[i * n + j];
        }
    int rc = svd_tall(M, N, w, uu, uc, s, vv);
    if (vecs && rc != -1) {
        /* tall: A = UU S VV^T -> u = UU, vt = VV^T. wide: A^T = UU S VV^T -> A = VV S UU^T,
         * u = VV (m x m), vt = UU^T (uc x n). */
        if (tall) {
            memcpy(u, uu, (size_t)(M * uc) * sizeof *u);
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < N; j++) vt[i * N + j] = vv[j * N + i];
        } else {
            memcpy(u, vv, (size_t)(N * N) * sizeof *u);
            for (int64_t i = 0; i < uc; i++)
                for (int64_t j = 0; j < M; j++) vt[i * M + j] = uu[j * uc + i];
        }
    }
    free(w);
    free(uu);
    free(vv);
    return rc;
}
