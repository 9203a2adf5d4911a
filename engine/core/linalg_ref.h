/* core/linalg_ref.h: dense matrix decompositions in plain C on float64, one matrix at a time.
 * defines: ddpl_ref_lu, ddpl_ref_lu_solve, ddpl_ref_cholesky, ddpl_ref_qr, ddpl_ref_eigh,
 *          ddpl_ref_svd.
 *
 * No LAPACK is linked (DESIGN.md: no new dependencies), so the linear-algebra ops run these on
 * the host for every device: LU with partial pivoting, Cholesky, Householder QR, tridiagonal
 * QL for the symmetric eigenproblem and one-sided (Hestenes) Jacobi for the SVD (accurate to
 * float64 round-off, small singular values to high relative accuracy, at a few times LAPACK's
 * O(n^3) cost). Matrices are row-major and contiguous;
 * sizes are elements. */
#ifndef DDPL_LINALG_REF_H
#define DDPL_LINALG_REF_H

#include <stdbool.h>
#include <stdint.h>

/* In place LU of the n x n matrix a: P a = L U, L unit lower (below the diagonal), U upper.
 * piv[i]: the row swapped with row i at step i; *sign: the permutation's sign (+1/-1).
 * Returns 0, or the 1-based index of the first exactly zero pivot (LAPACK's info: the
 * factorization is finished but U is singular). */
int ddpl_ref_lu(int64_t n, double *a, int64_t *piv, int *sign);
/* b (n x nrhs) := A^-1 b from ddpl_ref_lu's lu and piv (U must be non-singular). */
void ddpl_ref_lu_solve(int64_t n, const double *lu, const int64_t *piv, int64_t nrhs, double *b);
/* In place lower Cholesky factor of the symmetric n x n a (its lower triangle is read); the
 * strict upper triangle is zeroed. Returns 0, or the order of the first leading minor that is
 * not positive-definite (a pivot <= 0; a NaN pivot gives NaN in the factor, not an error). */
int ddpl_ref_cholesky(int64_t n, double *a);
/* Householder QR of the m x n a (overwritten as scratch). q: m x qc with qc = min(m,n)
 * (reduced) or m (complete), may be NULL; r: rr x n with rr = qc, upper triangular. Returns 0,
 * or -1 when out of memory. */
int ddpl_ref_qr(int64_t m, int64_t n, double *a, double *q, int64_t qc, double *r);
/* Eigenvalues w (n, ascending) and eigenvectors v (n x n, column j for w[j], may be NULL) of the
 * symmetric a (not modified) by Householder tridiagonalisation and implicit QL (EISPACK's
 * tred2/tql2), accurate to eps ||A||. Returns 0, -1 when QL did not converge (NaN or inf
 * input), -2 when out of memory. */
int ddpl_ref_eigh(int64_t n, double *a, double *w, double *v);
/* a (m x n) = u diag(s) vt with s (k = min(m,n), descending, >= 0); full: u m x m and vt n x n,
 * else u m x k and vt k x n. u and vt may be NULL (values only). a is not modified. Returns 0,
 * -1 when out of memory, -2 when the sweeps did not converge. */
int ddpl_ref_svd(int64_t m, int64_t n, const double *a, double *u, double *s, double *vt,
                 bool full);

#endif
