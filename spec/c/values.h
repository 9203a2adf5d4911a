/* spec/c/values.h: tensors written as literals in the C tests of ops.
 * defines: T (a CPU tensor of any dtype from doubles), SZ (a sizes literal), V (a values
 * literal): T(2, SZ(2, 3), DDPL_INT64, V(1, 2, 3, 4, 5, 6)). */
#ifndef DDPL_SPEC_VALUES_H
#define DDPL_SPEC_VALUES_H

#include "ddpl/ddpl.h"

/* A CPU tensor of dtype dt from doubles (converted through float64); NULL on error. */
static inline ddpl_tensor *T(int ndim, const int64_t *sizes, ddpl_dtype dt, const double *v)
{
    ddpl_tensor *d = ddpl_from_data(ndim, sizes, DDPL_FLOAT64, v, ddpl_cpu());
    ddpl_tensor *r = ddpl_to(d, dt, ddpl_cpu());
    ddpl_tensor_release(d);
    return r;
}
#define SZ(...) ((int64_t[]){__VA_ARGS__})
#define V(...)  ((double[]){__VA_ARGS__})

#endif
