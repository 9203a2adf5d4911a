/* core/dtype.c: dtype names and sizes, half/bfloat16 conversion, element load/store, promotion.
 * defines: ddpl_dtype_* (ddpl_dtype_int_range: the integer dtypes' bounds),
 * ddpl_value_overflows (whether a user's number fits a dtype), ddpl_half_to_float,
 * ddpl_float_to_half, ddpl_load_f64, ddpl_store_f64, ddpl_load_i64,
 * ddpl_store_i64, ddpl_promote_types, ddpl_result_type. */
#include <float.h>
#include <math.h>

#include "core.h"

static const char *const dtype_names[DDPL_DTYPE_COUNT] = {
    [DDPL_FLOAT32] = "float32",   [DDPL_FLOAT64] = "float64", [DDPL_FLOAT16] = "float16",
    [DDPL_BFLOAT16] = "bfloat16", [DDPL_INT64] = "int64",     [DDPL_INT32] = "int32",
    [DDPL_UINT8] = "uint8",       [DDPL_BOOL] = "bool",       [DDPL_INT8] = "int8",
    [DDPL_INT16] = "int16",
};
static const size_t dtype_sizes[DDPL_DTYPE_COUNT] = {
    [DDPL_FLOAT32] = 4, [DDPL_FLOAT64] = 8, [DDPL_FLOAT16] = 2, [DDPL_BFLOAT16] = 2,
    [DDPL_INT64] = 8,   [DDPL_INT32] = 4,   [DDPL_UINT8] = 1,   [DDPL_BOOL] = 1,
    [DDPL_INT8] = 1,    [DDPL_INT16] = 2,
};

const char *ddpl_dtype_name(ddpl_dtype dt)
{
    return (unsigned)dt < DDPL_DTYPE_COUNT ? dtype_names[dt] : "invalid";
}

int ddpl_dtype_from_name(const char *name)
{
    for (int i = 0; i < DDPL_DTYPE_COUNT; i++)
        if (strcmp(name, dtype_names[i]) == 0) return i;
    /* PyTorch's aliases */
    if (!strcmp(name, "float")) return DDPL_FLOAT32;
    if (!strcmp(name, "double")) return DDPL_FLOAT64;
    if (!strcmp(name, "half")) return DDPL_FLOAT16;
    if (!strcmp(name, "long")) return DDPL_INT64;
    if (!strcmp(name, "int")) return DDPL_INT32;
    if (!strcmp(name, "short")) return DDPL_INT16;
    return -1;
}

/* The values of the integer dtypes (bool as 0 and 1). */
static const struct {
    bool integral;
    int64_t lo, hi;
} int_ranges[DDPL_DTYPE_COUNT] = {
    [DDPL_INT64] = {true, INT64_MIN, INT64_MAX}, [DDPL_INT32] = {true, INT32_MIN, INT32_MAX},
    [DDPL_INT16] = {true, INT16_MIN, INT16_MAX}, [DDPL_INT8] = {true, INT8_MIN, INT8_MAX},
    [DDPL_UINT8] = {true, 0, UINT8_MAX},         [DDPL_BOOL] = {true, 0, 1},
};

bool ddpl_dtype_int_range(ddpl_dtype dt, int64_t *lo, int64_t *hi)
{
    if ((unsigned)dt >= DDPL_DTYPE_COUNT || !int_ranges[dt].integral) return false;
    *lo = int_ranges[dt].lo;
    *hi = int_ranges[dt].hi;
    return true;
}

/* The largest finite value of a floating dtype (none for float64). */
static double float_max(ddpl_dtype dt)
{
    switch (dt) {
    case DDPL_FLOAT16:
        return 65504.0;
    case DDPL_BFLOAT16:
        return 0x1.fep127;
    case DDPL_FLOAT32:
        return FLT_MAX;
    default:
        return HUGE_VAL;
    }
}

/* c10::overflows<To, From> for From = int64 (a Python or Lua integer) and From = double:
 * - an integer overflows outside [lo, hi], except that an unsigned dtype also takes negatives
 *   down to -hi, which wrap (uint8: -1 -> 255), so `a - b` can be computed as `a + 255 * b`;
 * - a float overflows when NaN or infinite or outside [lo, hi] before truncation: 127.9 does
 *   not fit int8, 3.7 does (stored as 3), -0.5 does not fit uint8. Compared in double: int64's
 *   hi (2^63 - 1) rounds up to 2^63, which itself is out of range;
 * - for a floating dtype, a finite number beyond its largest finite value overflows (float16:
 *   65504.5 and 1e10 do; inf and NaN do not). */
bool ddpl_value_overflows(ddpl_dtype dt, bool is_int, int64_t i, double d)
{
    if (ddpl_dtype_is_floating(dt)) { /* infinities and NaN are values of the dtype */
        double v = is_int ? (double)i : d, m = float_max(dt);
        return v == v && !isinf(v) && (v > m || v < -m);
    }
    int64_t lo, hi;
    if (dt == DDPL_BOOL || !ddpl_dtype_int_range(dt, &lo, &hi)) return false;
    if (is_int) {
        if (lo == 0 && i < 0) return i < -hi;
        return i < lo || i > hi;
    }
    if (d != d || isinf(d)) return true;
    if (dt == DDPL_INT64) return d < -0x1p63 || d >= 0x1p63;
    return d < (double)lo || d > (double)hi;
}

size_t ddpl_dtype_size(ddpl_dtype dt)
{
    return (unsigned)dt < DDPL_DTYPE_COUNT ? dtype_sizes[dt] : 0;
}

bool ddpl_dtype_is_floating(ddpl_dtype dt)
{
    return dt == DDPL_FLOAT32 || dt == DDPL_FLOAT64 || dt == DDPL_FLOAT16 || dt == DDPL_BFLOAT16;
}

bool ddpl_dtype_is_integral(ddpl_dtype dt)
{
    return !ddpl_dtype_is_floating(dt);
}

ddpl_dtype ddpl_default_float_dtype(void)
{
    return DDPL_FLOAT32;
}

/* IEEE binary16 <-> binary32, round to nearest even, with subnormals, inf and NaN. */
float ddpl_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(mant & 0x400)) {
                mant <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    union {
        uint32_t u;
        float f;
    } v = {.u = bits};
    return v.f;
}

uint16_t ddpl_float_to_half(float f)
{
    union {
        float f;
        uint32_t u;
    } v = {.f = f};
    uint32_t x = v.u, sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or NaN */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* overflow to inf */
    if (absx < 0x38800000u) {                                  /* subnormal or zero in half */
        if (absx < 0x33000000u) return (uint16_t)sign;
        uint32_t mant = (absx & 0x7fffff) | 0x800000;
        int shift = 126 - (int)(absx >> 23); /* 14..24 */
        uint32_t r = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = absx - 0x38000000u; /* rebias exponent 127 -> 15 */
    uint32_t h = r >> 13, rem = r & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

double ddpl_load_f64(const void *p, ddpl_dtype dt)
{
    switch (dt) {
    case DDPL_FLOAT32:
        return *(const float *)p;
    case DDPL_FLOAT64:
        return *(const double *)p;
    case DDPL_FLOAT16:
        return ddpl_half_to_float(*(const uint16_t *)p);
    case DDPL_BFLOAT16:
        return ddpl_bf16_to_float(*(const uint16_t *)p);
    case DDPL_INT64:
        return (double)*(const int64_t *)p;
    case DDPL_INT32:
        return *(const int32_t *)p;
    case DDPL_INT16:
        return *(const int16_t *)p;
    case DDPL_INT8:
        return *(const int8_t *)p;
    case DDPL_UINT8:
        return *(const uint8_t *)p;
    case DDPL_BOOL:
        return *(const uint8_t *)p ? 1.0 : 0.0;
    default:
        return 0;
    }
}

void ddpl_store_f64(void *p, ddpl_dtype dt, double v)
{
    switch (dt) {
    case DDPL_FLOAT32:
        *(float *)p = (float)v;
        break;
    case DDPL_FLOAT64:
        *(double *)p = v;
        break;
    case DDPL_FLOAT16:
        *(uint16_t *)p = ddpl_float_to_half((float)v);
        break;
    case DDPL_BFLOAT16:
        *(uint16_t *)p = ddpl_float_to_bf16((float)v);
        break;
    case DDPL_INT64:
        *(int64_t *)p = ddpl_f64_to_i64(v);
        break;
    case DDPL_INT32:
        *(int32_t *)p = (int32_t)ddpl_f64_to_i64(v);
        break;
    case DDPL_INT16:
        *(int16_t *)p = (int16_t)ddpl_f64_to_i64(v);
        break;
    case DDPL_INT8:
        *(int8_t *)p = (int8_t)ddpl_f64_to_i64(v);
        break;
    case DDPL_UINT8:
        *(uint8_t *)p = (uint8_t)ddpl_f64_to_i64(v);
        break;
    case DDPL_BOOL:
        *(uint8_t *)p = v != 0;
        break;
    default:
        break;
    }
}

int64_t ddpl_load_i64(const void *p, ddpl_dtype dt)
{
    switch (dt) {
    case DDPL_INT64:
        return *(const int64_t *)p;
    case DDPL_INT32:
        return *(const int32_t *)p;
    case DDPL_INT16:
        return *(const int16_t *)p;
    case DDPL_INT8:
        return *(const int8_t *)p;
    case DDPL_UINT8:
        return *(const uint8_t *)p;
    case DDPL_BOOL:
        return *(const uint8_t *)p != 0;
    default:
        return ddpl_f64_to_i64(ddpl_load_f64(p, dt));
    }
}

void ddpl_store_i64(void *p, ddpl_dtype dt, int64_t v)
{
    switch (dt) {
    case DDPL_INT64:
        *(int64_t *)p = v;
        break;
    case DDPL_INT32:
        *(int32_t *)p = (int32_t)v;
        break;
    case DDPL_INT16:
        *(int16_t *)p = (int16_t)v;
        break;
    case DDPL_INT8:
        *(int8_t *)p = (int8_t)v;
        break;
    case DDPL_UINT8:
        *(uint8_t *)p = (uint8_t)v;
        break;
    case DDPL_BOOL:
        *(uint8_t *)p = v != 0;
        break;
    default:
        ddpl_store_f64(p, dt, (double)v);
        break;
    }
}

/* ---- promotion ---- */
static int category(ddpl_dtype dt)
{
    if (dt == DDPL_BOOL) return 0;
    return ddpl_dtype_is_floating(dt) ? 2 : 1;
}

/* PyTorch's promotion lattice (c10's promoteTypes), one row per dtype in enum order; checked
 * against PyTorch by spec/tensor/tensor_spec.lua (spec/fixtures/promotion.lua). Notable entries:
 * uint8 with int8 gives int16 (the smallest type holding both ranges), float16 with bfloat16
 * float32, and any integer with a 16-bit float keeps the 16-bit float. */
#define F32 DDPL_FLOAT32
#define F64 DDPL_FLOAT64
#define F16 DDPL_FLOAT16
#define BF  DDPL_BFLOAT16
#define I64 DDPL_INT64
#define I32 DDPL_INT32
#define U8  DDPL_UINT8
#define B1  DDPL_BOOL
#define I8  DDPL_INT8
#define I16 DDPL_INT16
static const unsigned char promote_table[DDPL_DTYPE_COUNT][DDPL_DTYPE_COUNT] = {
    /*          F32  F64  F16  BF   I64  I32  U8   B1   I8   I16 */
    [F32] = {F32, F64, F32, F32, F32, F32, F32, F32, F32, F32},
    [F64] = {F64, F64, F64, F64, F64, F64, F64, F64, F64, F64},
    [F16] = {F32, F64, F16, F32, F16, F16, F16, F16, F16, F16},
    [BF] = {F32, F64, F32, BF, BF, BF, BF, BF, BF, BF},
    [I64] = {F32, F64, F16, BF, I64, I64, I64, I64, I64, I64},
    [I32] = {F32, F64, F16, BF, I64, I32, I32, I32, I32, I32},
    [U8] = {F32, F64, F16, BF, I64, I32, U8, U8, I16, I16},
    [B1] = {F32, F64, F16, BF, I64, I32, U8, B1, I8, I16},
    [I8] = {F32, F64, F16, BF, I64, I32, I16, I8, I8, I16},
    [I16] = {F32, F64, F16, BF, I64, I32, I16, I16, I16, I16},
};
#undef F32
#undef F64
#undef F16
#undef BF
#undef I64
#undef I32
#undef U8
#undef B1
#undef I8
#undef I16

ddpl_dtype ddpl_promote_types(ddpl_dtype a, ddpl_dtype b)
{
    return (ddpl_dtype)promote_table[a][b];
}

/* PyTorch's three-tier rule: the dtype of dimensioned tensors wins, unless a 0-dim tensor (or
 * failing that a wrapped number) belongs to a higher category, in which case that one is used
 * (a wrapped float number becomes the default float dtype). */
ddpl_dtype ddpl_result_type(int n, ddpl_tensor *const *ts)
{
    int have[3] = {0, 0, 0};
    ddpl_dtype tier[3] = {DDPL_BOOL, DDPL_BOOL, DDPL_BOOL};
    for (int i = 0; i < n; i++) {
        const ddpl_tensor *t = ts[i];
        if (!t) continue;
        int k = t->wrapped_number ? 2 : (t->ndim == 0 ? 1 : 0);
        ddpl_dtype dt = (ddpl_dtype)t->dtype;
        if (k == 2 && ddpl_dtype_is_floating(dt)) dt = ddpl_default_float_dtype();
        if (k == 2 && category(dt) == 1) dt = DDPL_INT64;
        tier[k] = have[k] ? ddpl_promote_types(tier[k], dt) : dt;
        have[k] = 1;
    }
    ddpl_dtype result = DDPL_BOOL;
    int have_result = 0;
    for (int k = 0; k < 3; k++) {
        if (!have[k]) continue;
        if (!have_result) {
            result = tier[k];
            have_result = 1;
        } else if (category(tier[k]) > category(result)) {
            /* a higher category from a lower tier: for wrapped numbers use the default float */
            result = (k == 2 && category(tier[k]) == 2) ? ddpl_default_float_dtype() : tier[k];
            if (k == 1 && category(tier[k]) == 2 && category(result) == 2) result = tier[k];
        }
    }
    return result;
}
