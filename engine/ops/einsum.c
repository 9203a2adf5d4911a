/* ops/einsum.c: einsum over any number of operands.
 * defines: ddpl_einsum.
 *
 * PyTorch 1.13's semantics: labels a-z and A-Z, '...' for broadcast dims, an implicit output
 * (the ellipsis dims, then the labels seen once, uppercase before lowercase) or an explicit one
 * after '->', a label repeated within an operand takes its diagonal, size-1 dims broadcast.
 * A composition: each operand first takes its diagonals (a product with an identity mask, then
 * a sum) and sums the labels no one else needs; then the operands are contracted left to right,
 * each pair as one bmm of (batch, left, contracted) by (batch, contracted, right) views, so no
 * step loops over the product of all sizes, and gradients and CUDA come from those ops. */
#include <ctype.h>

#include "linalg_util.h"

#define N_LETTERS 52                          /* A-Z: 0..25, a-z: 26..51 */
#define N_LABELS  (N_LETTERS + DDPL_MAX_DIMS) /* then the ellipsis dims */

typedef struct {
    ddpl_tensor *t; /* borrowed (an input) or owned (a step's result) */
    bool owned;
    int n;
    int lab[DDPL_MAX_DIMS];
} term;

static int label_of(char c)
{
    return isupper((unsigned char)c) ? c - 'A' : c - 'a' + 26;
}
static char label_char(int l)
{
    return (char)(l < 26 ? 'A' + l : 'a' + l - 26);
}

/* The labels of one subscript string s[0..len) for an operand of ndim dims (ndim < 0: the
 * output), '...' becoming the last `nell` ellipsis labels; returns the count or -1. */
static int parse_term(const char *s, int len, int ndim, int nell_max, int *lab, int *nell,
                      int operand)
{
    int n = 0, letters = 0;
    bool ell = false;
    for (int i = 0; i < len; i++)
        if (isalpha((unsigned char)s[i])) letters++;
    for (int i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (ell || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.')
                return ddpl_error("einsum(): found '.' for operand %d that is not part of any "
                                  "ellipsis",
                                  operand);
            ell = true;
            int e = ndim >= 0 ? ndim - letters : nell_max;
            if (e < 0)
                return ddpl_error("einsum(): the number of subscripts in the equation (%d) is "
                                  "more than the number of dimensions (%d) for operand %d",
                                  letters, ndim, operand);
            if (n + e > DDPL_MAX_DIMS) return ddpl_error("einsum(): too many dimensions");
            *nell = e;
            for (int j = 0; j < e; j++) lab[n++] = N_LETTERS + nell_max - e + j;
            i += 2;
        } else if (isalpha((unsigned char)s[i])) {
            if (n >= DDPL_MAX_DIMS) return ddpl_error("einsum(): too many dimensions");
            lab[n++] = label_of(s[i]);
        } else {
            return ddpl_error("einsum(): invalid subscript given at index %d in the equation "
                              "string, subscripts must be in [a-zA-Z]",
                              (int)i);
        }
    }
    if (ndim >= 0 && !ell && letters != ndim)
        return ddpl_error("einsum(): the number of subscripts in the equation (%d) does not match "
                          "the number of dimensions (%d) for operand %d and no ellipsis was given",
                          letters, ndim, operand);
    return n;
}

/* x's tensor becomes r (a new reference, or NULL after a failed step: -1) */
static int replace(term *x, ddpl_tensor *r)
{
    if (!r) return -1;
    if (x->owned) ddpl_tensor_release(x->t);
    x->t = r;
    x->owned = true;
    return 0;
}

/* x with its dims permuted to the labels `want` (all of x's labels, distinct) */
static ddpl_tensor *permute_to(op_temps *k, term *x, int n, const int *want)
{
    int perm[DDPL_MAX_DIMS];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < x->n; j++)
            if (x->lab[j] == want[i]) perm[i] = j;
    return OP_T(k, ddpl_permute(x->t, x->n, perm));
}

/* takes the diagonal of each label repeated within x: x * I (on the two dims), summed over
 * the second one */
static int take_diagonals(term *x, int operand)
{
    for (int i = 0; i < x->n; i++)
        for (int j = i + 1; j < x->n; j++) {
            if (x->lab[i] != x->lab[j]) continue;
            int64_t n = x->t->sizes[i];
            if (x->t->sizes[j] != n)
                return ddpl_error("einsum(): subscript %c is repeated for operand %d but the sizes "
                                  "don't match, %lld != %lld",
                                  label_char(x->lab[i]), operand, (long long)n,
                                  (long long)x->t->sizes[j]);
            int64_t shape[DDPL_MAX_DIMS];
            for (int d = 0; d < x->n; d++) shape[d] = d == i || d == j ? n : 1;
            op_temps k = {0};
            ddpl_tensor *eye = OP_T(&k, ddpl_eye(n, n, (ddpl_dtype)x->t->dtype, x->t->device));
            ddpl_tensor *mask = eye ? OP_T(&k, ddpl_reshape(eye, x->n, shape)) : NULL;
            ddpl_tensor *prod = OP_B(&k, ddpl_mul, x->t, mask);
            if (replace(x, op_temps_result(&k, prod ? OP_T(&k, ddpl_sum_dim(prod, j, false))
                                                    : NULL)) < 0)
                return -1;
            for (int d = j; d < x->n - 1; d++) x->lab[d] = x->lab[d + 1];
            x->n--;
            j--; /* the label at j is a new one now */
        }
    return 0;
}

/* sums x over its labels for which keep[] is false */
static int sum_unneeded(term *x, const bool *keep)
{
    int dims[DDPL_MAX_DIMS], nd = 0, m = 0;
    for (int i = 0; i < x->n; i++)
        if (!keep[x->lab[i]]) dims[nd++] = i;
    if (!nd) return 0;
    if (replace(x, ddpl_sum_dims(x->t, nd, dims, false)) < 0) return -1;
    for (int i = 0; i < x->n; i++)
        if (keep[x->lab[i]]) x->lab[m++] = x->lab[i];
    x->n = m;
    return 0;
}

/* a and b contracted into a, keeping the labels in keep: one bmm. size[] holds every label's
 * broadcast size. */
static int contract(term *a, term *b, const bool *keep, const int64_t *size)
{
    bool in_a[N_LABELS] = {0}, in_b[N_LABELS] = {0};
    for (int i = 0; i < a->n; i++) in_a[a->lab[i]] = true;
    for (int i = 0; i < b->n; i++) in_b[b->lab[i]] = true;
    bool ka[N_LABELS], kb[N_LABELS]; /* each side first sums what only it has and no one needs */
    for (int l = 0; l < N_LABELS; l++) ka[l] = keep[l] || in_b[l], kb[l] = keep[l] || in_a[l];
    if (sum_unneeded(a, ka) < 0 || sum_unneeded(b, kb) < 0) return -1;
    int batch[DDPL_MAX_DIMS], con[DDPL_MAX_DIMS], fa[DDPL_MAX_DIMS], fb[DDPL_MAX_DIMS];
    int nbt = 0, nc = 0, nfa = 0, nfb = 0;
    int64_t sbt = 1, sc = 1, sfa = 1, sfb = 1;
    for (int i = 0; i < a->n; i++) {
        int l = a->lab[i];
        if (in_b[l] && keep[l])
            batch[nbt++] = l, sbt *= size[l];
        else if (in_b[l])
            con[nc++] = l, sc *= size[l];
        else
            fa[nfa++] = l, sfa *= a->t->sizes[i];
    }
    for (int i = 0; i < b->n; i++)
        if (!in_a[b->lab[i]]) fb[nfb++] = b->lab[i], sfb *= b->t->sizes[i];
    if (nbt + nfa + nfb > DDPL_MAX_DIMS) return ddpl_error("einsum(): too many dimensions");
    /* shared labels broadcast to their full size on both sides */
    for (int s = 0; s < 2; s++) {
        term *x = s ? b : a;
        int64_t shape[DDPL_MAX_DIMS];
        bool grow = false;
        for (int i = 0; i < x->n; i++) {
            bool shared = in_a[x->lab[i]] && in_b[x->lab[i]];
            shape[i] = shared ? size[x->lab[i]] : x->t->sizes[i];
            grow = grow || shape[i] != x->t->sizes[i];
        }
        if (grow && replace(x, ddpl_expand(x->t, x->n, shape)) < 0) return -1;
    }
    op_temps kk = {0}, *k = &kk;
    int order[DDPL_MAX_DIMS], n = 0;
    for (int i = 0; i < nbt; i++) order[n++] = batch[i];
    for (int i = 0; i < nfa; i++) order[n++] = fa[i];
    for (int i = 0; i < nc; i++) order[n++] = con[i];
    ddpl_tensor *pa = permute_to(k, a, n, order);
    n = 0;
    for (int i = 0; i < nbt; i++) order[n++] = batch[i];
    for (int i = 0; i < nc; i++) order[n++] = con[i];
    for (int i = 0; i < nfb; i++) order[n++] = fb[i];
    ddpl_tensor *pb = permute_to(k, b, n, order);
    int64_t s3a[3] = {sbt, sfa, sc}, s3b[3] = {sbt, sc, sfb};
    ddpl_tensor *ra = pa ? OP_T(k, ddpl_reshape(pa, 3, s3a)) : NULL;
    ddpl_tensor *rb = pb && ra ? OP_T(k, ddpl_reshape(pb, 3, s3b)) : NULL;
    ddpl_tensor *p = OP_B(k, ddpl_bmm, ra, rb);
    if (!p) return op_temps_result(k, NULL), -1;
    int64_t out[DDPL_MAX_DIMS];
    int no = 0;
    for (int i = 0; i < nbt; i++) a->lab[no] = batch[i], out[no++] = size[batch[i]];
    for (int i = 0; i < nfa; i++) a->lab[no] = fa[i], out[no++] = pa->sizes[nbt + i];
    for (int i = 0; i < nfb; i++) a->lab[no] = fb[i], out[no++] = pb->sizes[nbt + nc + i];
    a->n = no;
    return replace(a, op_temps_result(k, OP_T(k, ddpl_reshape(p, no, out))));
}

ddpl_tensor *ddpl_einsum(const char *equation, int n, ddpl_tensor *const *ops)
{
    if (n < 1) return ddpl_error("einsum(): must provide at least one operand"), NULL;
    char eq[512];
    size_t len = 0;
    for (const char *c = equation; *c; c++)
        if (!isspace((unsigned char)*c)) {
            if (len + 1 >= sizeof eq) return ddpl_error("einsum(): the equation is too long"), NULL;
            eq[len++] = *c;
        }
    eq[len] = 0;
    const char *arrow = strstr(eq, "->");
    int lhs_len = arrow ? (int)(arrow - eq) : (int)len;
    for (int i = 1; i < n; i++)
        if (ddpl_check_same_device("einsum", ops[0], ops[i]) < 0) return NULL;
    /* operand subscripts */
    int starts[65], ends[65], count = 0, st = 0;
    for (int i = 0; i <= lhs_len; i++)
        if (i == lhs_len || eq[i] == ',') {
            if (count >= 64) return ddpl_error("einsum(): too many operands"), NULL;
            starts[count] = st, ends[count++] = i, st = i + 1;
        }
    if (count < n)
        return ddpl_error("einsum(): more operands were provided than specified in the equation"),
               NULL;
    if (count > n)
        return ddpl_error("einsum(): fewer operands were provided than specified in the "
                          "equation"),
               NULL;
    term *t = calloc((size_t)n, sizeof *t);
    if (!t) return ddpl_error("einsum(): out of memory"), NULL;
    int nell_max = 0, nell;
    int64_t size[N_LABELS];
    int uses[N_LABELS] = {0};
    for (int l = 0; l < N_LABELS; l++) size[l] = -1;
    op_temps k = {0};
    ddpl_tensor *result = NULL;
    for (int i = 0; i < n; i++) { /* ellipsis widths first: labels are right-aligned */
        int letters = 0;
        bool ell = false;
        for (int c = starts[i]; c < ends[i]; c++)
            letters += isalpha((unsigned char)eq[c]) != 0, ell = ell || eq[c] == '.';
        if (ell && ops[i]->ndim - letters > nell_max) nell_max = ops[i]->ndim - letters;
    }
    for (int i = 0; i < n; i++) {
        t[i].t = ops[i];
        nell = 0;
        t[i].n = parse_term(eq + starts[i], ends[i] - starts[i], ops[i]->ndim, nell_max, t[i].lab,
                            &nell, i);
        if (t[i].n < 0) goto done;
        for (int d = 0; d < t[i].n; d++) {
            int l = t[i].lab[d];
            int64_t s = ops[i]->sizes[d];
            for (int e = 0; e < d; e++)
                if (t[i].lab[e] == l && ops[i]->sizes[e] != s) {
                    ddpl_error("einsum(): subscript %c is repeated for operand %d but the sizes "
                               "don't match, %lld != %lld",
                               label_char(l), i, (long long)ops[i]->sizes[e], (long long)s);
                    goto done;
                }
            uses[l]++;
            if (size[l] < 0 || size[l] == 1)
                size[l] = s == 1 && size[l] > 1 ? size[l] : s;
            else if (s != 1 && s != size[l]) {
                if (l < N_LETTERS)
                    ddpl_error("einsum(): subscript %c has size %lld for operand %d which does not "
                               "broadcast with previously seen size %lld",
                               label_char(l), (long long)s, i, (long long)size[l]);
                else
                    ddpl_error("einsum(): operands do not broadcast in the ellipsis dimensions");
                goto done;
            }
        }
    }
    /* the output's labels */
    int out[DDPL_MAX_DIMS], no = 0;
    bool keep[N_LABELS] = {0};
    if (arrow) {
        const char *o = arrow + 2;
        no = parse_term(o, (int)strlen(o), -1, nell_max, out, &nell, -1);
        if (no < 0) goto done;
        for (int i = 0; i < no; i++) {
            if (out[i] < N_LETTERS && size[out[i]] < 0) {
                ddpl_error("einsum(): output subscript %c does not appear in the equation for any "
                           "input operand",
                           label_char(out[i]));
                goto done;
            }
            if (keep[out[i]]) {
                ddpl_error("einsum(): output subscript %c appears more than once in the output",
                           label_char(out[i]));
                goto done;
            }
            keep[out[i]] = true;
        }
    } else {
        for (int l = N_LETTERS; l < N_LETTERS + nell_max; l++) out[no++] = l;
        for (int l = 0; l < N_LETTERS; l++)
            if (uses[l] == 1) {
                if (no >= DDPL_MAX_DIMS) {
                    ddpl_error("einsum(): too many dimensions");
                    goto done;
                }
                out[no++] = l;
            }
        for (int i = 0; i < no; i++) keep[out[i]] = true;
    }
    /* per operand: diagonals, then the labels only it has and the output does not */
    for (int i = 0; i < n; i++) {
        if (take_diagonals(&t[i], i) < 0) goto done;
        bool need[N_LABELS];
        for (int l = 0; l < N_LABELS; l++) need[l] = keep[l];
        for (int j = 0; j < n; j++)
            for (int d = 0; j != i && d < t[j].n; d++) need[t[j].lab[d]] = true;
        if (sum_unneeded(&t[i], need) < 0) goto done;
    }
    /* left to right: keep what the output or a later operand needs */
    for (int i = 1; i < n; i++) {
        bool need[N_LABELS];
        for (int l = 0; l < N_LABELS; l++) need[l] = keep[l];
        for (int j = i + 1; j < n; j++)
            for (int d = 0; d < t[j].n; d++) need[t[j].lab[d]] = true;
        if (contract(&t[0], &t[i], need, size) < 0) goto done;
    }
    if (sum_unneeded(&t[0], keep) < 0) goto done;
    /* output labels absent from the result (size-1 broadcast leftovers) cannot occur: every
     * output label comes from some operand and is kept */
    ddpl_tensor *r = permute_to(&k, &t[0], no, out);
    if (r && t[0].n != no) r = NULL, ddpl_error("einsum(): internal label mismatch");
    result = r ? ddpl_tensor_retain(r) : NULL;
done:
    op_temps_release(&k);
    for (int i = 0; i < n; i++)
        if (t[i].owned) ddpl_tensor_release(t[i].t);
    free(t);
    return result;
}
