/* ops/print.c: tensors as text, the way PyTorch 1.13 prints them (torch/_tensor_str.py).
 * defines: ddpl_tensor_format.
 *
 * One formatter for the whole tensor, as in PyTorch: floats print as integers with a trailing
 * '.' when every finite non-zero value is whole, in scientific notation when those values span
 * more than 1000x or reach 1e8 (or go below 1e-4), otherwise with 4 decimals; every element is
 * padded to the widest one. More than 1000 elements print summarised: 3 items at each edge of
 * every dimension around "...". Lines wrap at 80 columns. Suffixes name what is not the
 * default: dtype (float32, int64 and bool are not printed), device, grad_fn or
 * requires_grad. */
#include <math.h>
#include <stdarg.h>

#include "op_util.h"

#define LINEWIDTH 80
#define EDGEITEMS 3
#define THRESHOLD 1000
#define PRECISION 4

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool failed;
} sbuf;

static void put(sbuf *b, const char *s, size_t len)
{
    if (b->failed) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

static void puts_(sbuf *b, const char *s)
{
    put(b, s, strlen(s));
}

static void putf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(sbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    put(b, tmp, len < (int)sizeof tmp ? (size_t)len : sizeof tmp - 1);
}

static void spaces(sbuf *b, int n)
{
    for (int i = 0; i < n; i++) put(b, " ", 1);
}

/* ---- the formatter ---- */

typedef struct formatter {
    ddpl_dtype dtype;
    bool floating, int_mode, sci;
    int width;
    /* statistics gathered over the (summarised) values */
    bool any_finite_nonzero, all_whole;
    double min_abs, max_abs;
} formatter;

typedef struct printer {
    const ddpl_tensor *t; /* on the CPU */
    const char *base;
    size_t esz;
    bool summarize;
    formatter f;
} printer;

static double value_at(const printer *p, const int64_t *idx, int nd)
{
    int64_t off = 0;
    for (int d = 0; d < nd; d++) off += idx[d] * p->t->strides[d];
    return ddpl_load_f64(p->base + off * (int64_t)p->esz, p->f.dtype);
}

static int64_t int_at(const printer *p, const int64_t *idx, int nd)
{
    int64_t off = 0;
    for (int d = 0; d < nd; d++) off += idx[d] * p->t->strides[d];
    return ddpl_load_i64(p->base + off * (int64_t)p->esz, p->f.dtype);
}

/* Python's '{:.Nf}'/'{:.Ne}' for a float, with Python's spelling of non-finite values. */
static int format_float(char *buf, size_t n, double v, bool sci, int precision)
{
    if (isnan(v)) return snprintf(buf, n, "nan");
    if (isinf(v)) return snprintf(buf, n, v < 0 ? "-inf" : "inf");
    return snprintf(buf, n, sci ? "%.*e" : "%.*f", precision, v);
}

/* One element as text, without padding. */
static int element_text(const formatter *f, char *buf, size_t n, double v, int64_t iv)
{
    if (f->dtype == DDPL_BOOL) return snprintf(buf, n, "%s", iv ? "True" : "False");
    if (!f->floating) return snprintf(buf, n, "%lld", (long long)iv);
    if (f->sci) return format_float(buf, n, v, true, PRECISION);
    if (f->int_mode) {
        int len = format_float(buf, n, v, false, 0);
        if (isfinite(v) && len + 1 < (int)n) {
            buf[len++] = '.';
            buf[len] = '\0';
        }
        return len;
    }
    return format_float(buf, n, v, false, PRECISION);
}

/* Visits the elements PyTorch's get_summarized_data keeps (all, or the edge items). */
typedef void (*visit_fn)(printer *p, const int64_t *idx, int nd);

static void visit(printer *p, int64_t *idx, int d, visit_fn fn)
{
    int nd = p->t->ndim;
    if (d == nd) {
        fn(p, idx, nd);
        return;
    }
    int64_t size = p->t->sizes[d];
    for (int64_t i = 0; i < size; i++) {
        if (p->summarize && size > 2 * EDGEITEMS && i == EDGEITEMS) i = size - EDGEITEMS;
        idx[d] = i;
        visit(p, idx, d + 1, fn);
    }
}

static void gather_stats(printer *p, const int64_t *idx, int nd)
{
    formatter *f = &p->f;
    char buf[64];
    if (!f->floating) {
        int len = element_text(f, buf, sizeof buf, 0, int_at(p, idx, nd));
        if (len > f->width) f->width = len;
        return;
    }
    double v = value_at(p, idx, nd);
    if (!isfinite(v) || v == 0) return;
    double a = fabs(v);
    if (!f->any_finite_nonzero || a < f->min_abs) f->min_abs = a;
    if (!f->any_finite_nonzero || a > f->max_abs) f->max_abs = a;
    f->any_finite_nonzero = true;
    if (v != ceil(v)) f->all_whole = false;
}

/* Second pass for floats: the widths under the chosen notation. */
static void gather_widths(printer *p, const int64_t *idx, int nd)
{
    formatter *f = &p->f;
    double v = value_at(p, idx, nd);
    if (!isfinite(v) || v == 0) return;
    char buf[64];
    int len = element_text(f, buf, sizeof buf, v, 0); /* int mode: the '.' is PyTorch's +1 */
    if (len > f->width) f->width = len;
}

static void build_formatter(printer *p)
{
    formatter *f = &p->f;
    f->floating = ddpl_dtype_is_floating(f->dtype);
    f->int_mode = true;
    f->all_whole = true;
    f->width = 1;
    int64_t idx[DDPL_MAX_DIMS] = {0};
    visit(p, idx, 0, gather_stats);
    if (!f->floating || !f->any_finite_nonzero) return;
    double ratio = f->max_abs / f->min_abs;
    if (f->all_whole) {
        f->sci = ratio > 1000. || f->max_abs > 1.e8;
    } else {
        f->int_mode = false;
        f->sci = ratio > 1000. || f->max_abs > 1.e8 || f->min_abs < 1.e-4;
    }
    visit(p, idx, 0, gather_widths);
}

static void put_element(printer *p, sbuf *b, const int64_t *idx, int nd)
{
    char buf[64];
    int len = p->f.floating ? element_text(&p->f, buf, sizeof buf, value_at(p, idx, nd), 0)
                            : element_text(&p->f, buf, sizeof buf, 0, int_at(p, idx, nd));
    spaces(b, p->f.width - len);
    put(b, buf, (size_t)len);
}

/* _vector_str: elements wrapped to the line width. */
static void put_vector(printer *p, sbuf *b, int64_t *idx, int d, int indent)
{
    int64_t size = p->t->sizes[d];
    int per_line = (LINEWIDTH - indent) / (p->f.width + 2);
    if (per_line < 1) per_line = 1;
    put(b, "[", 1);
    int64_t item = 0; /* position among printed items, "..." included */
    for (int64_t i = 0; i < size; i++, item++) {
        if (item) {
            if (item % per_line == 0) {
                put(b, ",\n", 2);
                spaces(b, indent + 1);
            } else {
                put(b, ", ", 2);
            }
        }
        if (p->summarize && size > 2 * EDGEITEMS && i == EDGEITEMS) {
            puts_(b, " ...");
            i = size - EDGEITEMS - 1;
            continue;
        }
        idx[d] = i;
        put_element(p, b, idx, d + 1);
    }
    put(b, "]", 1);
}

/* _tensor_str_with_formatter for dims d.. of the tensor */
static void put_tensor(printer *p, sbuf *b, int64_t *idx, int d, int indent)
{
    int nd = p->t->ndim;
    if (d == nd) {
        put_element(p, b, idx, nd);
        return;
    }
    if (d == nd - 1) {
        put_vector(p, b, idx, d, indent);
        return;
    }
    int64_t size = p->t->sizes[d];
    put(b, "[", 1);
    for (int64_t i = 0; i < size; i++) {
        if (i) {
            put(b, ",", 1);
            for (int k = 0; k < nd - d - 1; k++) put(b, "\n", 1);
            spaces(b, indent + 1);
        }
        if (p->summarize && size > 2 * EDGEITEMS && i == EDGEITEMS) {
            puts_(b, "...");
            i = size - EDGEITEMS - 1;
            continue;
        }
        idx[d] = i;
        put_tensor(p, b, idx, d + 1, indent + 1);
    }
    put(b, "]", 1);
}

/* _add_suffixes: ", suffix" on the last line, or on a new line past the line width. The line
 * length is tracked as PyTorch tracks it (its first estimate, len(s) - s.rfind('\n') + 1, is
 * one or two more than the true length; keeping the quirk keeps the wrapping identical). */
static void add_suffix(sbuf *b, const char *suffix, int indent, size_t *last_line)
{
    if (b->failed) return;
    if (*last_line == 0) {
        const char *nl = strrchr(b->p, '\n');
        *last_line = nl ? (size_t)(b->p + b->n - nl) + 1 : b->n + 2;
    }
    size_t len = strlen(suffix);
    if (*last_line + len + 2 > LINEWIDTH) {
        put(b, ",\n", 2);
        spaces(b, indent);
        *last_line = (size_t)indent + len;
    } else {
        put(b, ", ", 2);
        *last_line += len + 2;
    }
    puts_(b, suffix);
}

char *ddpl_tensor_format(const ddpl_tensor *t)
{
    static const char prefix[] = "tensor(";
    const int indent = (int)sizeof prefix - 1;
    sbuf b = {0};
    puts_(&b, prefix);
    ddpl_dtype dt = (ddpl_dtype)t->dtype;
    int64_t numel = ddpl_tensor_numel(t);
    char suffix[160];
    size_t last_line = 0;

    /* values are read from a CPU view (device tensors are copied over first) */
    ddpl_tensor *cpu = NULL;
    if (numel > 0) {
        bool prev = ddpl_set_grad_enabled(false); /* a copy to read, not part of the graph */
        cpu = t->device.type == DDPL_CPU ? ddpl_tensor_retain((ddpl_tensor *)t)
                                         : ddpl_to((ddpl_tensor *)t, dt, ddpl_cpu());
        ddpl_set_grad_enabled(prev);
        if (!cpu) {
            free(b.p);
            return NULL;
        }
    }
    if (numel == 0) {
        puts_(&b, "[]");
    } else {
        printer p = {cpu, ddpl_data_ptr(cpu), ddpl_dtype_size(dt), numel > THRESHOLD, {0}};
        p.f.dtype = dt;
        build_formatter(&p);
        int64_t idx[DDPL_MAX_DIMS] = {0};
        put_tensor(&p, &b, idx, 0, indent);
    }
    ddpl_tensor_release(cpu);

    if (t->device.type != DDPL_CPU) {
        char dev[32];
        snprintf(suffix, sizeof suffix, "device='%s'", ddpl_device_str(t->device, dev, sizeof dev));
        add_suffix(&b, suffix, indent, &last_line);
    }
    if (numel == 0) {
        if (t->ndim != 1) { /* the shape as a Python tuple */
            sbuf s = {0};
            puts_(&s, "size=(");
            for (int i = 0; i < t->ndim; i++)
                putf(&s, i ? ", %lld" : "%lld", (long long)t->sizes[i]);
            puts_(&s, ")");
            if (!s.failed) add_suffix(&b, s.p, indent, &last_line);
            free(s.p);
        }
        if (dt != DDPL_FLOAT32) {
            snprintf(suffix, sizeof suffix, "dtype=%s", ddpl_dtype_name(dt));
            add_suffix(&b, suffix, indent, &last_line);
        }
    } else if (dt != DDPL_FLOAT32 && dt != DDPL_INT64 && dt != DDPL_BOOL) {
        snprintf(suffix, sizeof suffix, "dtype=%s", ddpl_dtype_name(dt));
        add_suffix(&b, suffix, indent, &last_line);
    }
    const char *grad_fn = ddpl_tensor_grad_fn_name(t);
    if (grad_fn) {
        snprintf(suffix, sizeof suffix, "grad_fn=<%s>", grad_fn);
        add_suffix(&b, suffix, indent, &last_line);
    } else if (ddpl_tensor_requires_grad(t)) {
        add_suffix(&b, "requires_grad=True", indent, &last_line);
    }
    put(&b, ")", 1);
    if (b.failed) {
        free(b.p);
        ddpl_error("tostring: out of memory formatting a tensor");
        return NULL;
    }
    return b.p;
}
