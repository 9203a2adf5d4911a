"""tools/fixture_compare.py: whether a regenerated fixture (spec/fixtures/*.lua) says the same as the
committed one, for the generators' --check (tools/gen_fixtures.py: write_files, fixture_main).

defines: fixture_difference(old, new) -> None when the two texts agree, else a line saying where
         they first differ.

Byte equality is too strict: PyTorch's results depend in their last bits on the BLAS kernels of
the machine (OpenBLAS picks GEMM kernels by CPU; a float32 sum of products computed in another
order differs by an ulp or a few), so a fixture written on one machine read as stale on another
although every spec passes with it. So both texts are parsed (the fixtures are Lua table
constructors: tables, strings, numbers, booleans, 1/0 and 0/0, comments) and compared as data:
everything must be identical (names, shapes, dtypes, options, integers, the order of cases)
except the numbers inside a tensor's `values` or `digest`, which must agree within a tenth of the
tolerance the specs compare that tensor with: the case's own rtol/atol where it sets them,
else spec/support/helpers.lua's H.tolerance for the dtype (float64 1e-9 relative, float32 1e-5). A change
that a spec could notice is still reported, rounding noise is not. Measured: the float32
gradients of matmul/f32/2d_2d_large (linalg.lua; the case sets rtol = atol = 1e-4) differ by up
to 1.3e-6 between this machine's OpenBLAS and the one that wrote the file, a seventy-fifth of
the case's tolerance, so a hundredth would still call noise stale; float64 values differ by
1e-16 relative, a ten-millionth of a tenth of theirs. A digest's
three sums are judged on the spec's own scale, the tolerance times its abs_sum.
"""
import math
import re

# spec/support/helpers.lua H.tolerance(dtype), as (rtol, atol); the check allows a tenth of it
TOLERANCE = {'float64': (1e-9, 1e-12), 'float32': (1e-5, 1e-5), 'float16': (1e-3, 1e-3),
             'bfloat16': (1e-2, 1e-2)}
FRACTION = 0.1

TOKEN = re.compile(r"""\s+|--[^\n]*|(?P<num>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?:/0)?)"""
                   r"""|(?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(?P<name>[A-Za-z_]\w*)"""
                   r"""|(?P<punct>[{}\[\]=,;])""")


class Number:
    """A Lua number: the float or integer subtype matters (1 and 1.0 differ to Lua)."""

    def __init__(self, text):
        self.text = text
        if text.endswith('/0'):
            num = float(text[:-2])
            self.value = math.nan if num == 0 else math.copysign(math.inf, num)
            self.is_float = True
        else:
            self.is_float = any(c in text for c in '.eE')
            self.value = float(text) if self.is_float else int(text)


def tokens(text):
    out, pos = [], 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise ValueError('fixture_compare: cannot read %r' % text[pos:pos + 40])
        pos = m.end()
        kind = m.lastgroup
        if kind:
            out.append((kind, m.group(kind)))
    return out


def parse(text):
    """The value after `return` (or the whole text): Lua tables become lists of (key, value)
    pairs in written order (key None for positional entries)."""
    toks = tokens(text)
    i = 1 if toks and toks[0] == ('name', 'return') else 0

    def value(i):
        kind, tok = toks[i]
        if kind == 'num':
            return Number(tok), i + 1
        if kind == 'str':
            return ('str', tok), i + 1
        if kind == 'name' and tok in ('true', 'false', 'nil'):
            return ('lit', tok), i + 1
        if tok == '{':
            return table(i + 1)
        raise ValueError('fixture_compare: unexpected %r' % tok)

    def table(i):
        fields = []
        while toks[i][1] != '}':
            key = None
            if toks[i][1] == '[':
                key, i = value(i + 1)
                key = ('key', key.text if isinstance(key, Number) else key[1])
                i += 2  # ']' '='
            elif toks[i][0] == 'name' and toks[i + 1][1] == '=':
                key = ('key', toks[i][1])
                i += 2
            v, i = value(i)
            fields.append((key, v))
            if toks[i][1] in (',', ';'):
                i += 1
        return fields, i + 1

    v, _ = value(i)
    return v


def field(fields, name):
    for k, v in fields:
        if k == ('key', name):
            return v
    return None


def close(a, b, rtol, atol, scale):
    if math.isnan(a.value) or math.isnan(b.value) or math.isinf(a.value) or math.isinf(b.value):
        return a.text == b.text
    return abs(a.value - b.value) <= atol + rtol * scale


def differ(a, b, where, tol=None, digest=False, case_tol=(None, None)):
    """None when a and b agree, else where they first differ. tol: (rtol, atol, scale) for the
    numbers of a tensor's values or digest (None: they must be identical); case_tol: the
    enclosing case's (rtol, atol) overrides."""
    if isinstance(a, Number) or isinstance(b, Number):
        if not (isinstance(a, Number) and isinstance(b, Number)) or a.is_float != b.is_float:
            return '%s: %s against %s' % (where, getattr(a, 'text', a), getattr(b, 'text', b))
        if tol is None or not b.is_float:
            ok = a.text == b.text or a.value == b.value
        else:
            ok = close(a, b, tol[0], tol[1], tol[2] if digest else abs(b.value))
        return None if ok else '%s: %s against %s' % (where, a.text, b.text)
    if isinstance(a, tuple) or isinstance(b, tuple):
        return None if a == b else '%s: %s against %s' % (where, a, b)
    if len(a) != len(b):
        return '%s: %d entries against %d' % (where, len(a), len(b))
    case_tol = tuple(v.value if isinstance(v, Number) else d
                     for v, d in zip((field(b, 'rtol'), field(b, 'atol')), case_tol))
    dtype = field(b, 'dtype')
    tensor_tol = TOLERANCE.get(dtype[1].strip('\'"')) if isinstance(dtype, tuple) else None
    if tensor_tol:
        tensor_tol = tuple(FRACTION * (c if c is not None else d)
                           for c, d in zip(case_tol, tensor_tol))
    for n, ((ka, va), (kb, vb)) in enumerate(zip(a, b)):
        if ka != kb:
            return '%s: key %s against %s' % (where, ka, kb)
        name = kb[1] if kb else str(n + 1)
        sub_tol, sub_digest = tol, digest
        if tensor_tol and name in ('values', 'digest'):
            # a digest is {sum, abs_sum, weighted}: all judged against abs_sum, as the spec does
            scale = abs(vb[1][1].value) if name == 'digest' else None
            sub_tol, sub_digest = tensor_tol + (scale,), name == 'digest'
        d = differ(va, vb, '%s.%s' % (where, name), sub_tol, sub_digest, case_tol)
        if d:
            return d
    return None


def fixture_difference(old, new):
    if old is None:
        return 'no committed file'
    if old == new:
        return None
    return differ(parse(old), parse(new), 'fixture')
