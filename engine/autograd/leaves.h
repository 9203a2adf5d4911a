/* autograd/leaves.h: what the layers above autograd (the DDP reducer) ask of it about leaves:
 * which leaves a graph reaches, and where a leaf's gradient is made (its gradient home).
 * defines: ddpl_leaves_reached, ddpl_grad_home_of, ddpl_grad_home_replace,
 *          ddpl_grad_home_prepare_write.
 *
 * Callers see no nodes, edges or storages: the graph and the memory under gradient homes stay
 * autograd's business. ddpl_tensor_set_grad_home (ddpl/autograd.h) sets a home plainly. */
#ifndef DDPL_AUTOGRAD_LEAVES_H
#define DDPL_AUTOGRAD_LEAVES_H

#include "core/core.h"

/* reached[i]: whether a backward from roots would send a gradient to leaves[i] (a root that is
 * a leaf reaches itself; roots that do not require grad reach nothing). One walk of the graph,
 * O(nodes + n_leaves). */
void ddpl_leaves_reached(int n_roots, ddpl_tensor *const *roots, int n_leaves,
                         ddpl_tensor *const *leaves, bool *reached);

/* The leaf's gradient home (borrowed), or NULL. */
ddpl_tensor *ddpl_grad_home_of(const ddpl_tensor *leaf);

/* ddpl_tensor_set_grad_home, and what lies in the memory of the sole-owner home it replaces is
 * never written through the new one: a .grad living there moves with its storage object into a
 * new sole-owner home of the same size (values copied, so tensors sharing it stay valid, and
 * the old memory is let go); anything else over the old memory gets memory of its own first
 * (ddpl_tensor_take_memory). */
int ddpl_grad_home_replace(ddpl_tensor *leaf, ddpl_tensor *home, bool sole_owner);

/* Before something other than backward writes the leaf's sole-owner home (DDP's allreduce
 * writing the average there): every tensor over its memory except the home and the leaf's own
 * .grad moves to a copy of its own, as backward does before it computes into a home. Nothing
 * to do for a home that is not sole-owner. */
int ddpl_grad_home_prepare_write(ddpl_tensor *leaf);

#endif
