/* cuemu/nccl/nccl_standin_reduce.c: the element types and reduction operations of the NCCL
 * stand-in, and the one loop that folds the ranks' contributions.
 * defines: standin_dtype_size, standin_dtype_name, standin_op_name, standin_reduces,
 *          standin_reduce (nccl_standin.h).
 *
 * Order and rounding: element i is folded as ((x0 op x1) op x2) ... op x(n-1), x_r being rank
 * r's value, on every rank, so every rank gets the same bits (as NCCL guarantees between the
 * ranks of one call). Each step rounds to the element type, as NCCL's kernels do: float16 and
 * bfloat16 are widened to float, combined, and rounded back (to nearest even) after every step;
 * float32 and float64 are combined in their own type (this file is built with
 * -ffp-contract=off, so no step is fused into an FMA). Integers wrap (computed unsigned, so
 * signed overflow is defined). ncclAvg is NCCL's: on floating types each x_r is first multiplied
 * by 1/n rounded to the type (NCCL's pre-multiplied sum), on integers the wrapped sum is
 * divided by n, truncating. Max and Min of floats use fmax/fmin (a NaN loses to a number).
 * What only real NCCL shows: its ring or tree adds more than two ranks' values in another
 * order (one that differs between chunks and with the number of channels), so sums over three
 * or more ranks may differ from these in the last bits; for two ranks the single add is the
 * same. */
#include "nccl_standin.h"

#include <math.h>
#include <string.h>

size_t standin_dtype_size(ncclDataType_t dt)
{
    switch (dt) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
        return 1;
    case ncclFloat16:
    case ncclBfloat16:
        return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
        return 8;
    default:
        return 0;
    }
}

const char *standin_dtype_name(ncclDataType_t dt)
{
    static const char *const names[ncclNumTypes] = {
        "ncclInt8",    "ncclUint8",    "ncclInt32",      "ncclUint32",
        "ncclInt64",   "ncclUint64",   "ncclFloat16",    "ncclFloat32",
        "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
    return (unsigned)dt < ncclNumTypes ? names[dt] : "(invalid type)";
}

const char *standin_op_name(ncclRedOp_t op)
{
    static const char *const names[ncclNumOps] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin",
                                                  "ncclAvg"};
    return (unsigned)op < ncclNumOps ? names[op] : "(invalid op)";
}

bool standin_reduces(ncclDataType_t dt, ncclRedOp_t op)
{
    return standin_dtype_size(dt) != 0 && dt != ncclFloat8e4m3 && dt != ncclFloat8e5m2 &&
           (unsigned)op < ncclNumOps;
}

/* The folds run rank by rank over all elements (d = x0, then d = d op x1, ...): per element
 * the same order as element by element, but each pass is a plain loop the compiler can
 * vectorise, with the switch on the operation outside it. dst never aliases src (src is the
 * staging area). EACH(stmt) runs stmt for every element index i. */
#define EACH(stmt)                                                                                 \
    for (size_t i = 0; i < count; i++) stmt

/* Integers: T the type, U its unsigned twin (wrapping arithmetic). */
#define FOLD_INT(T, U)                                                                             \
    do {                                                                                           \
        T *d = dst;                                                                                \
        memcpy(d, src[0], count * sizeof(T));                                                      \
        for (int r = 1; r < n; r++) {                                                              \
            const T *x = src[r];                                                                   \
            switch (op) {                                                                          \
            case ncclProd:                                                                         \
                EACH(d[i] = (T)((U)d[i] * (U)x[i]));                                               \
                break;                                                                             \
            case ncclMax:                                                                          \
                EACH(d[i] = x[i] > d[i] ? x[i] : d[i]);                                            \
                break;                                                                             \
            case ncclMin:                                                                          \
                EACH(d[i] = x[i] < d[i] ? x[i] : d[i]);                                            \
                break;                                                                             \
            default: /* Sum, Avg */                                                                \
                EACH(d[i] = (T)((U)d[i] + (U)x[i]));                                               \
            }                                                                                      \
        }                                                                                          \
        if (op == ncclAvg) EACH(d[i] = (T)(d[i] / (T)n));                                          \
    } while (0)

/* float32 / float64: T the type, MAX/MIN fmaxf/fminf or fmax/fmin; Avg's scale is 1/n in T. */
#define FOLD_FLOAT(T, MAX, MIN)                                                                    \
    do {                                                                                           \
        T *d = dst;                                                                                \
        const T *x0 = src[0], scale = (T)(1.0 / n);                                                \
        if (op == ncclAvg)                                                                         \
            EACH(d[i] = x0[i] * scale);                                                            \
        else                                                                                       \
            memcpy(d, x0, count * sizeof(T));                                                      \
        for (int r = 1; r < n; r++) {                                                              \
            const T *x = src[r];                                                                   \
            switch (op) {                                                                          \
            case ncclProd:                                                                         \
                EACH(d[i] = d[i] * x[i]);                                                          \
                break;                                                                             \
            case ncclMax:                                                                          \
                EACH(d[i] = MAX(d[i], x[i]));                                                      \
                break;                                                                             \
            case ncclMin:                                                                          \
                EACH(d[i] = MIN(d[i], x[i]));                                                      \
                break;                                                                             \
            case ncclAvg:                                                                          \
                EACH(d[i] = d[i] + x[i] * scale);                                                  \
                break;                                                                             \
            default:                                                                               \
                EACH(d[i] = d[i] + x[i]);                                                          \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* float16 / bfloat16 (raw uint16_t codes): TO_F widens, FROM_F rounds; every intermediate is
 * rounded to the type, the Avg scale too (1/3 is 0x3555 in half, 0.33325, as NCCL's scalar
 * would be). */
#define FOLD_HALF(TO_F, FROM_F)                                                                    \
    do {                                                                                           \
        uint16_t *d = dst;                                                                         \
        const uint16_t *x0 = src[0];                                                               \
        const float scale = TO_F(FROM_F((float)(1.0 / n)));                                        \
        if (op == ncclAvg)                                                                         \
            EACH(d[i] = FROM_F(TO_F(x0[i]) * scale));                                              \
        else                                                                                       \
            memcpy(d, x0, count * sizeof(uint16_t));                                               \
        for (int r = 1; r < n; r++) {                                                              \
            const uint16_t *x = src[r];                                                            \
            switch (op) {                                                                          \
            case ncclProd:                                                                         \
                EACH(d[i] = FROM_F(TO_F(d[i]) * TO_F(x[i])));                                      \
                break;                                                                             \
            case ncclMax:                                                                          \
                EACH(d[i] = FROM_F(fmaxf(TO_F(d[i]), TO_F(x[i]))));                                \
                break;                                                                             \
            case ncclMin:                                                                          \
                EACH(d[i] = FROM_F(fminf(TO_F(d[i]), TO_F(x[i]))));                                \
                break;                                                                             \
            case ncclAvg:                                                                          \
                EACH(d[i] = FROM_F(TO_F(d[i]) + TO_F(FROM_F(TO_F(x[i]) * scale))));                \
                break;                                                                             \
            default:                                                                               \
                EACH(d[i] = FROM_F(TO_F(d[i]) + TO_F(x[i])));                                      \
            }                                                                                      \
        }                                                                                          \
    } while (0)

void standin_reduce(void *dst, const void *const *src, int n, size_t count, ncclDataType_t dt,
                    ncclRedOp_t op)
{
    switch (dt) {
    case ncclInt8:
        FOLD_INT(int8_t, uint8_t);
        break;
    case ncclUint8:
        FOLD_INT(uint8_t, uint8_t);
        break;
    case ncclInt32:
        FOLD_INT(int32_t, uint32_t);
        break;
    case ncclUint32:
        FOLD_INT(uint32_t, uint32_t);
        break;
    case ncclInt64:
        FOLD_INT(int64_t, uint64_t);
        break;
    case ncclUint64:
        FOLD_INT(uint64_t, uint64_t);
        break;
    case ncclFloat32:
        FOLD_FLOAT(float, fmaxf, fminf);
        break;
    case ncclFloat64:
        FOLD_FLOAT(double, fmax, fmin);
        break;
    case ncclFloat16:
        FOLD_HALF(cuemu_half_to_float, cuemu_float_to_half);
        break;
    case ncclBfloat16:
        FOLD_HALF(cuemu_bf16_to_float, cuemu_float_to_bf16);
        break;
    default: /* refused by standin_reduces before any data moved */
        break;
    }
}
