/* core/reduce_geom.c: planning a reduction (see reduce_geom.h).
 * defines: ddpl_reduce_geom_init. */
#include <stdlib.h>

#include "core.h"
#include "reduce_geom.h"

void ddpl_reduce_geom_init(ddpl_reduce_geom *g, const ddpl_tensor *in, const ddpl_tensor *out,
                           uint32_t mask)
{
    int nk = 0, nr = 0;
    g->nout = g->nred = 1;
    for (int d = 0; d < in->ndim; d++) {
        int64_t n = in->sizes[d];
        if (mask & (1u << d)) {
            g->nred *= n;
            if (n == 1) continue;
            g->rsize[nr] = n;
            g->rin[nr++] = in->strides[d];
        } else {
            g->nout *= n;
            if (n == 1) continue;
            g->ksize[nk] = n;
            g->kin[nk] = in->strides[d];
            g->kout[nk++] = out->strides[d];
        }
    }
    /* reduced dims: outer to inner by stride (insertion sort: at most 8) */
    for (int i = 1; i < nr; i++)
        for (int j = i; j > 0 && llabs(g->rin[j - 1]) < llabs(g->rin[j]); j--) {
            int64_t ts = g->rsize[j], ti = g->rin[j];
            g->rsize[j] = g->rsize[j - 1];
            g->rin[j] = g->rin[j - 1];
            g->rsize[j - 1] = ts;
            g->rin[j - 1] = ti;
        }
    /* coalesce neighbours that step through memory as one dim */
    int m = 0;
    for (int i = 1; i < nr; i++) {
        if (g->rin[m] == g->rin[i] * g->rsize[i]) {
            g->rsize[m] *= g->rsize[i];
            g->rin[m] = g->rin[i];
        } else {
            m++;
            g->rsize[m] = g->rsize[i];
            g->rin[m] = g->rin[i];
        }
    }
    g->nr = nr ? m + 1 : 0;
    m = 0;
    for (int i = 1; i < nk; i++) {
        if (g->kin[m] == g->kin[i] * g->ksize[i] && g->kout[m] == g->kout[i] * g->ksize[i]) {
            g->ksize[m] *= g->ksize[i];
            g->kin[m] = g->kin[i];
            g->kout[m] = g->kout[i];
        } else {
            m++;
            g->ksize[m] = g->ksize[i];
            g->kin[m] = g->kin[i];
            g->kout[m] = g->kout[i];
        }
    }
    g->nk = nk ? m + 1 : 0;
    /* a reduction over nothing still runs one (empty or single) row */
    if (g->nr == 0) {
        g->nr = 1;
        g->rsize[0] = g->nred; /* 1, or 0 for a reduced dim of size 0 */
        g->rin[0] = 0;
    }
}
