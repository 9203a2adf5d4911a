/* examples/embed/embed.c: embedding ddplua in a C program, both ways.
 * defines: main.
 *
 * (a) The C API alone: a linear layer y = x w^T + b with an MSE loss, backward, and the weight
 *     and bias gradients checked against the formula dL/dw = 2/N (y - t)^T x computed by hand.
 * (b) The engine inside the program's own lua_State: ddpl_lua_open makes `require 'ddplua'`
 *     work there; a C tensor goes into a Lua function and a tensor comes back.
 * Exits non-zero (with the reason on stderr) when anything is off, so it doubles as a test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>
#include <lualib.h>

#include "ddpl/ddpl.h"
#include "ddpl/lua.h"

#define N   4 /* samples */
#define IN  3 /* input features */
#define OUT 2 /* output features */

static int failures;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "embed_example: FAILED: %s (%s)\n", what, ddpl_last_error());
        failures++;
    }
}

/* (a) forward and backward through the C API, checked against a hand computation */
static void c_api_example(void)
{
    double x[N][IN], w[OUT][IN], b[OUT], t[N][OUT];
    for (int i = 0; i < N; i++)
        for (int k = 0; k < IN; k++) x[i][k] = 0.5 * i - 0.25 * k + 0.1;
    for (int o = 0; o < OUT; o++) {
        for (int k = 0; k < IN; k++) w[o][k] = 0.2 * (o + 1) - 0.1 * k;
        b[o] = 0.05 * o;
    }
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OUT; o++) t[i][o] = (i + o) % 2;

    /* float64 tensors, so the comparison can be tight */
    ddpl_tensor *tx = ddpl_from_data(2, (int64_t[]){N, IN}, DDPL_FLOAT64, x, ddpl_cpu());
    ddpl_tensor *tw = ddpl_from_data(2, (int64_t[]){OUT, IN}, DDPL_FLOAT64, w, ddpl_cpu());
    ddpl_tensor *tb = ddpl_from_data(1, (int64_t[]){OUT}, DDPL_FLOAT64, b, ddpl_cpu());
    ddpl_tensor *tt = ddpl_from_data(2, (int64_t[]){N, OUT}, DDPL_FLOAT64, t, ddpl_cpu());
    check(tx && tw && tb && tt, "creating the tensors");
    check(ddpl_tensor_set_requires_grad(tw, true) == 0, "requires_grad on w");
    check(ddpl_tensor_set_requires_grad(tb, true) == 0, "requires_grad on b");

    ddpl_tensor *wt = ddpl_t(tw);                      /* (IN,OUT) view */
    ddpl_tensor *xw = wt ? ddpl_matmul(tx, wt) : NULL; /* (N,OUT) */
    ddpl_tensor *y = xw ? ddpl_add(xw, tb) : NULL;     /* bias broadcast over rows */
    ddpl_tensor *loss = y ? ddpl_mse_loss(y, tt, DDPL_REDUCTION_MEAN) : NULL;
    check(loss != NULL, "forward");
    check(loss && ddpl_backward(loss, NULL, false) == 0, "backward");

    /* by hand: y = x w^T + b, dL/dy = 2/(N*OUT) (y - t) */
    double gw[OUT][IN] = {{0}}, gb[OUT] = {0}, lsum = 0;
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OUT; o++) {
            double yo = b[o];
            for (int k = 0; k < IN; k++) yo += x[i][k] * w[o][k];
            double d = yo - t[i][o], g = 2.0 * d / (N * OUT);
            lsum += d * d;
            gb[o] += g;
            for (int k = 0; k < IN; k++) gw[o][k] += g * x[i][k];
        }
    double got_loss = 0, got_gw[OUT * IN], got_gb[OUT];
    check(loss && ddpl_tensor_item(loss, &got_loss) == 0, "loss item");
    check(fabs(got_loss - lsum / (N * OUT)) < 1e-12, "loss value");
    ddpl_tensor *dw = ddpl_tensor_grad(tw), *db = ddpl_tensor_grad(tb); /* borrowed */
    check(dw && ddpl_tensor_to_doubles(dw, got_gw) == 0, "w.grad exists");
    check(db && ddpl_tensor_to_doubles(db, got_gb) == 0, "b.grad exists");
    double err = 0;
    for (int o = 0; o < OUT; o++) {
        for (int k = 0; k < IN; k++) err = fmax(err, fabs(got_gw[o * IN + k] - gw[o][k]));
        err = fmax(err, fabs(got_gb[o] - gb[o]));
    }
    check(err < 1e-12, "gradients match the hand computation");
    printf("C API: loss %.6f, max gradient error %.2e\n", got_loss, err);

    /* a bad call is an error, not a crash */
    check(ddpl_matmul(tx, tx) == NULL, "matmul of mismatched shapes fails");
    printf("C API: a bad matmul reports: %s\n", ddpl_last_error());

    ddpl_tensor *all[] = {tx, tw, tb, tt, wt, xw, y, loss};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) ddpl_tensor_release(all[i]);
}

/* (b) the engine in our own lua_State */
static const char *const lua_snippet =
    "local ddpl = require 'ddplua'\n"
    "local t = ...\n" /* the tensor C passed in */
    "local w = ddpl.ones(3, 2, {dtype = 'float64', requires_grad = true})\n"
    "local y = t:matmul(w):sum()\n"
    "y:backward()\n"
    "return w.grad, y:item()\n";

static void lua_example(void)
{
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    ddpl_lua_open(L);
    ddpl_tensor *t = ddpl_arange(0, 6, 1, DDPL_FLOAT64, ddpl_cpu()); /* 0..5 */
    ddpl_tensor *m = t ? ddpl_view(t, 2, (int64_t[]){2, 3}) : NULL;
    check(m != NULL, "making the input");
    int status = luaL_loadstring(L, lua_snippet);
    if (status == LUA_OK) {
        ddpl_lua_push_tensor(L, m); /* Lua takes its own reference */
        status = lua_pcall(L, 1, 2, 0);
    }
    if (status != LUA_OK) {
        fprintf(stderr, "embed_example: Lua error: %s\n", lua_tostring(L, -1));
        failures++;
    } else {
        /* d(sum(m @ w))/dw[k][j] = sum over rows of m[:, k]: 0+3, 1+4, 2+5 */
        ddpl_tensor *g = ddpl_lua_check_tensor(L, -2); /* borrowed while on the stack */
        double gv[6], sum = lua_tonumber(L, -1);
        check(ddpl_tensor_to_doubles(g, gv) == 0, "reading the gradient");
        check(gv[0] == 3 && gv[1] == 3 && gv[2] == 5 && gv[3] == 5 && gv[4] == 7 && gv[5] == 7,
              "Lua-side gradient");
        check(sum == 2 * 15.0, "Lua-side sum");
        printf("Lua state: sum %.1f, grad [%g %g; %g %g; %g %g]\n", sum, gv[0], gv[1], gv[2], gv[3],
               gv[4], gv[5]);
    }
    ddpl_tensor_release(m);
    ddpl_tensor_release(t);
    lua_close(L);
}

int main(void)
{
    c_api_example();
    lua_example();
    if (failures) return EXIT_FAILURE;
    printf("embed_example: ok\n");
    return EXIT_SUCCESS;
}
