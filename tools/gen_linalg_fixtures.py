#!/usr/bin/python3
"""tools/gen_linalg_fixtures.py: PyTorch reference values for spec/tensor/linalg_ext_spec.lua:
outer, dot, inner, kron, tensordot, cross, einsum, baddbmm/addbmm/addmv/addr, cdist, the
linalg norms, inv, solve, det, slogdet, cholesky, qr, svd, svdvals, eigh, eigvalsh.

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_linalg_fixtures.py            # writes spec/fixtures/linalg_ext.lua
    /usr/bin/python3 tools/gen_linalg_fixtures.py --check    # fails if the committed file differs

Cases use tools/gen_fixtures.py's format. Decompositions are defined up to signs (svd, eigh,
qr) or beyond (the extra columns of full_matrices), so their cases record sign-invariant
quantities, which the spec's runners compute the same way: singular values and eigenvalues,
squared entries of the singular/eigen vectors and of Q and R, reconstructions U S Vh, V L V^T,
Q R, and Q^T Q; the gradient is that of the first such output (a loss the sign choice does not
change). Inputs are well conditioned with distinct singular values / eigenvalues.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import F32, F64, fixture_main, make_case, rnd, write_fixture  # noqa: E402

INF = float('inf')


def fl(dt):
    return {F32: 'f32', F64: 'f64'}[dt]


def spd(n, dt, batch=()):
    a = rnd(*batch, n, n, dtype=F64)
    return (a @ a.mT + n * torch.eye(n, dtype=F64)).to(dt)


def well(n, dt, batch=()):
    """A well-conditioned square matrix: random plus a diagonal shift."""
    return (rnd(*batch, n, n, dtype=F64) + 3 * torch.eye(n, dtype=F64)).to(dt)


def sym(n, dt, batch=()):
    a = rnd(*batch, n, n, dtype=F64)
    return (a + a.mT).to(dt)


def product_cases():
    c = []
    for dt in (F32, F64):
        s = fl(dt)
        c.append(make_case('outer/' + s, 'outer', [rnd(4, dtype=dt), rnd(3, dtype=dt)],
                           torch.outer, diff=(0, 1)))
        c.append(make_case('dot/' + s, 'dot', [rnd(5, dtype=dt), rnd(5, dtype=dt)], torch.dot,
                           diff=(0, 1)))
        c.append(make_case('inner/' + s, 'inner', [rnd(2, 3, dtype=dt), rnd(4, 2, 3, dtype=dt)],
                           torch.inner, diff=(0, 1)))
        c.append(make_case('kron/' + s, 'kron', [rnd(2, 3, dtype=dt), rnd(3, 2, dtype=dt)],
                           torch.kron, diff=(0, 1)))
    c.append(make_case('inner/scalar', 'inner', [torch.tensor(1.5), rnd(2, 3)], torch.inner,
                       diff=(0, 1)))
    c.append(make_case('kron/mixed_rank', 'kron', [rnd(3, dtype=F64), rnd(2, 2, dtype=F64)],
                       torch.kron, diff=(0, 1)))
    c.append(make_case('tensordot/int', 'tensordot', [rnd(2, 3, 4, dtype=F64),
                                                      rnd(3, 4, 5, dtype=F64)],
                       lambda a, b: torch.tensordot(a, b, 2), diff=(0, 1), opts={'dims': 2}))
    c.append(make_case('tensordot/lists', 'tensordot', [rnd(2, 3, 4, dtype=F64),
                                                        rnd(4, 5, 2, dtype=F64)],
                       lambda a, b: torch.tensordot(a, b, ([0, 2], [2, 0])), diff=(0, 1),
                       opts={'dims': [[0, 2], [2, 0]]}))
    c.append(make_case('tensordot/zero', 'tensordot', [rnd(2, 3), rnd(4)],
                       lambda a, b: torch.tensordot(a, b, 0), opts={'dims': 0}))
    c.append(make_case('cross/linalg', 'linalg_cross', [rnd(4, 3, dtype=F64),
                                                        rnd(4, 3, dtype=F64)],
                       torch.linalg.cross, diff=(0, 1)))
    c.append(make_case('cross/linalg_dim0_broadcast', 'linalg_cross',
                       [rnd(3, 1, 2), rnd(3, 4, 2)], lambda a, b: torch.linalg.cross(a, b, dim=0),
                       opts={'dim': 0}))
    c.append(make_case('cross/torch_default_dim', 'cross', [rnd(2, 3, 3), rnd(2, 3, 3)],
                       lambda a, b: torch.cross(a, b)))
    c.append(make_case('cross/torch_dim', 'cross', [rnd(3, 3), rnd(3, 3)],
                       lambda a, b: torch.cross(a, b, dim=1), opts={'dim': 1}))
    for dt in (F32, F64):
        s = fl(dt)
        c.append(make_case('baddbmm/' + s, 'baddbmm', [rnd(3, 1, 4, dtype=dt),
                                                       rnd(3, 2, 5, dtype=dt),
                                                       rnd(3, 5, 4, dtype=dt)],
                           lambda i, a, b: torch.baddbmm(i, a, b, beta=0.5, alpha=2.0),
                           diff=(0, 1, 2), opts={'beta': 0.5, 'alpha': 2.0}))
    c.append(make_case('baddbmm/defaults', 'baddbmm', [rnd(2, 2, 3), rnd(2, 2, 4), rnd(2, 4, 3)],
                       torch.baddbmm, diff=(0, 1, 2)))
    nan_in = torch.full((2, 3), float('nan'))
    c.append(make_case('baddbmm/beta0_nan', 'baddbmm', [nan_in, rnd(4, 2, 5), rnd(4, 5, 3)],
                       lambda i, a, b: torch.baddbmm(i, a, b, beta=0.0), opts={'beta': 0.0}))
    c.append(make_case('addbmm/f64', 'addbmm', [rnd(2, 4, dtype=F64), rnd(3, 2, 5, dtype=F64),
                                                rnd(3, 5, 4, dtype=F64)],
                       lambda i, a, b: torch.addbmm(i, a, b, beta=2.0, alpha=-1.0),
                       diff=(0, 1, 2), opts={'beta': 2.0, 'alpha': -1.0}))
    c.append(make_case('addmv/f64', 'addmv', [rnd(3, dtype=F64), rnd(3, 4, dtype=F64),
                                              rnd(4, dtype=F64)],
                       lambda i, a, b: torch.addmv(i, a, b, beta=0.5, alpha=3.0),
                       diff=(0, 1, 2), opts={'beta': 0.5, 'alpha': 3.0}))
    c.append(make_case('addr/f64', 'addr', [rnd(1, 4, dtype=F64), rnd(3, dtype=F64),
                                            rnd(4, dtype=F64)],
                       lambda i, a, b: torch.addr(i, a, b, beta=1.5, alpha=0.5),
                       diff=(0, 1, 2), opts={'beta': 1.5, 'alpha': 0.5}))
    c.append(make_case('addmm/beta_alpha', 'addmm', [rnd(4, dtype=F64), rnd(3, 5, dtype=F64),
                                                     rnd(5, 4, dtype=F64)],
                       lambda i, a, b: torch.addmm(i, a, b, beta=-0.5, alpha=2.0),
                       diff=(0, 1, 2), opts={'beta': -0.5, 'alpha': 2.0}))
    return c


EINSUM = [
    ('matmul', 'ij,jk->ik', [(3, 4), (4, 5)]),
    ('bmm', 'bij,bjk->bik', [(2, 3, 4), (2, 4, 2)]),
    ('trace', 'ii', [(4, 4)]),
    ('diag', 'ii->i', [(4, 4)]),
    ('diag3', 'iij->ji', [(3, 3, 2)]),
    ('dot', 'i,i', [(5,), (5,)]),
    ('outer', 'i,j->ij', [(3,), (4,)]),
    ('transpose', 'ij->ji', [(3, 4)]),
    ('sum_all', 'ij->', [(3, 4)]),
    ('implicit', 'ji,kj', [(4, 3), (2, 4)]),
    ('implicit_upper', 'aB,Bc', [(2, 3), (3, 4)]),
    ('bilinear', 'bn,anm,bm->ba', [(2, 3), (4, 3, 5), (2, 5)]),
    ('chain4', 'ab,bc,cd,de->ae', [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ('ellipsis', '...ij,...jk->...ik', [(2, 3, 4), (2, 4, 5)]),
    ('ellipsis_broadcast', '...ij,...jk', [(1, 3, 2, 4), (2, 1, 4, 3)]),
    ('ellipsis_mid', 'i...j,j...->...i', [(2, 3, 4), (4, 3)]),
    ('batch_keep', 'bi,bi->b', [(3, 4), (3, 4)]),
    ('hadamard', 'ij,ij->ij', [(3, 4), (3, 4)]),
    ('broadcast1', 'ij,jk->ik', [(3, 1), (4, 2)]),
    ('spaces', ' i j , j k -> i k ', [(2, 3), (3, 2)]),
]


def einsum_cases():
    c = []
    for name, eq, shapes in EINSUM:
        ins = [rnd(*s, dtype=F64) for s in shapes]
        if name == 'broadcast1':
            ins = [rnd(3, 1, dtype=F64), rnd(1, 2, dtype=F64).expand(4, 2).contiguous()]
            eq = 'ij,jk->ik'
            # a size-1 label against size 4: broadcast (PyTorch 1.13 allows it)
            ins = [rnd(3, 1, dtype=F64), rnd(4, 2, dtype=F64)]
        c.append(make_case('einsum/' + name, 'einsum', ins,
                           lambda *xs, eq=eq: torch.einsum(eq, *xs),
                           diff=tuple(range(len(ins))), opts={'eq': eq}))
    c.append(make_case('einsum/f32', 'einsum', [rnd(3, 4), rnd(4, 5)],
                       lambda a, b: torch.einsum('ij,jk->ik', a, b), diff=(0, 1),
                       opts={'eq': 'ij,jk->ik'}))
    return c


def cdist_cases():
    c = []
    for p in (0.0, 1.0, 2.0, 1.5, INF):
        c.append(make_case('cdist/p%s' % p, 'cdist', [rnd(4, 3, dtype=F64), rnd(5, 3, dtype=F64)],
                           lambda a, b, p=p: torch.cdist(a, b, p=p), diff=(0, 1),
                           opts={'p': p}))
    c.append(make_case('cdist/mm_path', 'cdist', [rnd(30, 4, dtype=F64), rnd(27, 4, dtype=F64)],
                       lambda a, b: torch.cdist(a, b), diff=(0, 1), opts={'p': 2.0}))
    c.append(make_case('cdist/batched_f32', 'cdist', [rnd(2, 4, 3), rnd(1, 6, 3)],
                       lambda a, b: torch.cdist(a, b), diff=(0, 1), opts={'p': 2.0}))
    x = rnd(3, 2, dtype=F64)
    c.append(make_case('cdist/zero_distance', 'cdist', [x, x.clone()],
                       lambda a, b: torch.cdist(a, b), diff=(0, 1), opts={'p': 2.0}))
    return c


def norm_cases():
    c = []
    x = rnd(3, 4, 5, dtype=F64)
    for ord_ in (2.0, 1.0, INF, -INF, 0.0, 3.5):
        for dim, keep in ((None, False), ([0, 2], False), ([1], True), ([-1, 0], True)):
            c.append(make_case('vector_norm/ord%s/%s/%s' % (ord_, dim, keep), 'vector_norm', [x],
                               lambda a, o=ord_, d=dim, k=keep: torch.linalg.vector_norm(
                                   a, o, d, k), diff=(0,) if ord_ != 0.0 else (),
                               opts={'ord': ord_, 'dim': dim, 'keepdim': keep}))
    c.append(make_case('vector_norm/dtype', 'vector_norm', [rnd(3, 4)],
                       lambda a: torch.linalg.vector_norm(a, dtype=F64),
                       opts={'dtype': 'float64'}))
    m = rnd(2, 4, 3, dtype=F64)
    for ord_ in ('fro', 'nuc', 1.0, -1.0, 2.0, -2.0, INF, -INF):
        for dim, keep in (((-2, -1), False), ((0, 2), True)):
            c.append(make_case('matrix_norm/%s/%s/%s' % (ord_, dim, keep), 'matrix_norm', [m],
                               lambda a, o=ord_, d=dim, k=keep: torch.linalg.matrix_norm(
                                   a, o, d, k), diff=(0,),
                               opts={'ord': ord_, 'dim': list(dim), 'keepdim': keep}))
    v = rnd(5, dtype=F64)
    c.append(make_case('norm/default_2d', 'norm', [m[0]], torch.linalg.norm, diff=(0,)))
    c.append(make_case('norm/default_3d_flat', 'norm', [m], torch.linalg.norm, diff=(0,)))
    c.append(make_case('norm/ord_2d', 'norm', [m[0]], lambda a: torch.linalg.norm(a, 2),
                       diff=(0,), opts={'ord': 2.0}))
    c.append(make_case('norm/ord_1d', 'norm', [v], lambda a: torch.linalg.norm(a, 3),
                       diff=(0,), opts={'ord': 3.0}))
    c.append(make_case('norm/nuc_dims', 'norm', [m], lambda a: torch.linalg.norm(a, 'nuc', (0, 1)),
                       diff=(0,), opts={'ord': 'nuc', 'dim': [0, 1]}))
    c.append(make_case('norm/dim1', 'norm', [m], lambda a: torch.linalg.norm(a, dim=1,
                                                                               keepdim=True),
                       diff=(0,), opts={'dim': 1, 'keepdim': True}))
    return c


def solve_cases():
    c = []
    for dt in (F32, F64):
        s = fl(dt)
        c.append(make_case('inv/' + s, 'inv', [well(4, dt)], torch.linalg.inv, diff=(0,)))
        c.append(make_case('inv/batched/' + s, 'inv', [well(3, dt, (2, 2))], torch.linalg.inv,
                           diff=(0,)))
        c.append(make_case('solve/matrix/' + s, 'solve', [well(4, dt), rnd(4, 2, dtype=dt)],
                           torch.linalg.solve, diff=(0, 1)))
        c.append(make_case('det/' + s, 'det', [well(4, dt, (3,))], torch.linalg.det, diff=(0,)))
        c.append(make_case('slogdet/' + s, 'slogdet', [rnd(2, 4, 4, dtype=dt)],
                           lambda a: tuple(reversed(torch.linalg.slogdet(a))), diff=(0,)))
        c.append(make_case('cholesky/' + s, 'cholesky', [spd(4, dt, (2,))], torch.linalg.cholesky,
                           diff=(0,)))
    c.append(make_case('solve/vector', 'solve', [well(4, F64), rnd(4, dtype=F64)],
                       torch.linalg.solve, diff=(0, 1)))
    c.append(make_case('solve/batch_vector', 'solve', [well(3, F64, (2,)), rnd(2, 3, dtype=F64)],
                       torch.linalg.solve, diff=(0, 1)))
    c.append(make_case('solve/broadcast', 'solve', [well(3, F64, (2, 1)), rnd(3, 3, 2, dtype=F64)],
                       torch.linalg.solve, diff=(0, 1)))
    c.append(make_case('cholesky/upper', 'cholesky', [spd(3, F64)],
                       lambda a: torch.linalg.cholesky(a, upper=True), diff=(0,),
                       opts={'upper': True}))
    # no exactly singular case: PyTorch 1.13's gradient there is 0 (its LU gives det = -0 and
    # the SVD branch returns zeros), where the cofactor matrix is the derivative; the spec
    # checks ddplua's cofactors against values computed by hand
    c.append(make_case('det/pivoting', 'det', [torch.tensor([[0.0, 1.0], [2.0, 3.0]])],
                       torch.linalg.det, diff=(0,)))
    return c


def svd_inv(U, S, Vh, k):
    u, vh = U[..., :, :k], Vh[..., :k, :]
    return (torch.cat([S.flatten(), (u * u).flatten(), (vh * vh).flatten()]),
            (u * S.unsqueeze(-2)) @ vh, U.mT @ U, Vh @ Vh.mT)


def decomposition_cases():
    c = []
    for dt in (F32, F64):
        s = fl(dt)
        for shape in ((5, 3), (3, 5), (4, 4), (2, 4, 3)):
            for full in (False, True):
                m, n = shape[-2], shape[-1]
                k = min(m, n)
                name = 'svd/%s/%s/%s' % (s, 'x'.join(map(str, shape)), 'full' if full else 'red')
                c.append(make_case(name, 'svd', [rnd(*shape, dtype=dt)],
                                   lambda a, f=full, k=k: svd_inv(
                                       *torch.linalg.svd(a, full_matrices=f), k),
                                   diff=(0,), opts={'full_matrices': full, 'k': k}))
        c.append(make_case('svdvals/' + s, 'svdvals', [rnd(2, 5, 3, dtype=dt)],
                           torch.linalg.svdvals, diff=(0,)))
        for uplo in ('L', 'U'):
            a = rnd(2, 4, 4, dtype=dt)  # not symmetric: only the UPLO triangle is read
            c.append(make_case('eigh/%s/%s' % (s, uplo), 'eigh', [a],
                               lambda x, u=uplo: (lambda L, V: (
                                   torch.cat([L.flatten(), (V * V).flatten()]),
                                   (V * L.unsqueeze(-2)) @ V.mT))(*torch.linalg.eigh(x, u)),
                               diff=(0,), opts={'UPLO': uplo}))
        c.append(make_case('eigvalsh/' + s, 'eigvalsh', [sym(5, dt)], torch.linalg.eigvalsh,
                           diff=(0,)))
        for shape in ((5, 3), (4, 4), (3, 5), (2, 4, 3)):
            for mode in ('reduced', 'complete'):
                m, n = shape[-2], shape[-1]
                diff = (0,) if (mode == 'reduced' or m <= n) else ()
                name = 'qr/%s/%s/%s' % (s, 'x'.join(map(str, shape)), mode)
                c.append(make_case(name, 'qr', [rnd(*shape, dtype=dt)],
                                   lambda a, md=mode: (lambda Q, R: (
                                       torch.cat([(Q * Q).flatten(), (R * R).flatten()]),
                                       Q @ R, Q.mT @ Q))(*torch.linalg.qr(a, md)),
                                   diff=diff, opts={'mode': mode}))
    for dt in (F32, F64):
        c.append(make_case('pinv/' + fl(dt), 'pinv', [rnd(2, 5, 3, dtype=dt)], torch.linalg.pinv,
                           diff=(0,)))
    c.append(make_case('pinv/wide', 'pinv', [rnd(3, 5, dtype=F64)], torch.linalg.pinv, diff=(0,)))
    c.append(make_case('pinv/hermitian', 'pinv', [sym(4, F64)],
                       lambda a: torch.linalg.pinv(a, hermitian=True), diff=(0,),
                       opts={'hermitian': True}))
    low = rnd(5, 2, dtype=F64) @ rnd(2, 4, dtype=F64)  # rank 2
    c.append(make_case('pinv/rank_deficient', 'pinv', [low], torch.linalg.pinv))
    c.append(make_case('pinv/atol', 'pinv', [rnd(4, 4, dtype=F64)],
                       lambda a: torch.linalg.pinv(a, atol=0.5), opts={'atol': 0.5}))
    c.append(make_case('matrix_rank/low', 'matrix_rank', [low], torch.linalg.matrix_rank))
    c.append(make_case('matrix_rank/batched_f32', 'matrix_rank',
                       [torch.stack([low.float()[:4], rnd(4, 4)])], torch.linalg.matrix_rank))
    c.append(make_case('matrix_rank/rtol', 'matrix_rank', [rnd(4, 4, dtype=F64)],
                       lambda a: torch.linalg.matrix_rank(a, rtol=0.3), opts={'rtol': 0.3}))
    c.append(make_case('matrix_rank/hermitian', 'matrix_rank', [sym(4, F64)],
                       lambda a: torch.linalg.matrix_rank(a, atol=1.0, hermitian=True),
                       opts={'atol': 1.0, 'hermitian': True}))
    c.append(make_case('qr/r', 'qr_r', [rnd(5, 3, dtype=F64)],
                       lambda a: torch.linalg.qr(a, 'r')[1].abs(), opts={'mode': 'r'}))
    return c


def solve_right_cases():
    """left=False (XA = B); drawn after every other case, so that adding them moved no value"""
    c = []
    c.append(make_case('solve/right', 'solve', [well(3, F64, (2,)), rnd(2, 4, 3, dtype=F64)],
                       lambda a, b: torch.linalg.solve(a, b, left=False), diff=(0, 1),
                       opts={'left': False}))
    c.append(make_case('solve/right_broadcast', 'solve', [well(3, F32), rnd(2, 2, 3, dtype=F32)],
                       lambda a, b: torch.linalg.solve(a, b, left=False), diff=(0, 1),
                       opts={'left': False}))
    return c


def nan_cases():
    """NaN inputs, fixed values (drawn nothing, listed last): cdist with p=0 counts coordinates
    that differ as PyTorch's kernel does, min(ceil(|d|), 1), so a NaN gives NaN (norm(0) would
    count it as 1); cholesky lets a NaN pivot through as NaN (Debian's torch, OpenBLAS's potrf)
    rather than calling the matrix not positive-definite. Values only: no gradients of NaN."""
    nan = float('nan')
    c = []
    x = torch.tensor([[nan, 1.0, 2.0], [0.0, 1.0, 2.0], [0.5, nan, -1.0]], dtype=F64)
    y = torch.tensor([[0.0, 1.0, 2.0], [0.0, 0.0, 0.0]], dtype=F64)
    for p in (0.0, 1.0, 2.0):
        c.append(make_case('cdist/nan_p%s' % p, 'cdist', [x, y],
                           lambda a, b, p=p: torch.cdist(a, b, p=p), opts={'p': p}))
    for name, m in (('pivot', [[nan, 0.0], [0.0, 1.0]]), ('last', [[4.0, 2.0], [2.0, nan]]),
                    ('off_diagonal', [[1.0, nan], [nan, 1.0]])):
        c.append(make_case('cholesky/nan_' + name, 'cholesky', [torch.tensor(m, dtype=F64)],
                           torch.linalg.cholesky))
    return c


def render():
    cases = (product_cases() + einsum_cases() + cdist_cases() + norm_cases() + solve_cases() +
             decomposition_cases() + solve_right_cases() + nan_cases())
    return write_fixture('linalg_ext', cases, 'products, einsum, cdist, linalg norms and '
                         'decompositions (tools/gen_linalg_fixtures.py)')


if __name__ == '__main__':
    sys.exit(fixture_main(__doc__, 'tools/gen_linalg_fixtures.py', render))
