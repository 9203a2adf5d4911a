/* autograd/grad_home.c: gradient homes, memory a leaf's next gradient is computed straight into
 * (docs/internals/reducer.md, "Gradient homes"; backward's side is engine.c's plan_homes).
 * defines: ddpl_tensor_set_grad_home, ddpl_grad_home_of, ddpl_grad_home_replace,
 *          ddpl_grad_home_prepare_write. */
#include "graph.h"
#include "leaves.h"

int ddpl_tensor_set_grad_home(ddpl_tensor *leaf, ddpl_tensor *home, bool sole_owner)
{
    if (home) {
        char a[128], b[128];
        if (ddpl_grad_fn(leaf)) return ddpl_error("set_grad_home: the tensor is not a leaf");
        if (!ddpl_same_shape(leaf, home) || home->dtype != leaf->dtype ||
            !ddpl_same_device(home->device, leaf->device) || !ddpl_tensor_is_contiguous(home))
            return ddpl_error(
                "set_grad_home: the home must be contiguous with the leaf's shape "
                "%s, dtype %s and device; got shape %s, dtype %s%s",
                ddpl_shape_str(leaf, a, sizeof a), ddpl_dtype_name((ddpl_dtype)leaf->dtype),
                ddpl_shape_str(home, b, sizeof b), ddpl_dtype_name((ddpl_dtype)home->dtype),
                ddpl_same_device(home->device, leaf->device)
                    ? (ddpl_tensor_is_contiguous(home) ? "" : ", not contiguous")
                    : ", another device");
    }
    if (home && sole_owner &&
        (home->device.type != DDPL_CPU || home->offset != 0 ||
         (size_t)ddpl_tensor_numel(home) * ddpl_dtype_size((ddpl_dtype)home->dtype) !=
             home->storage->nbytes))
        return ddpl_error("set_grad_home: a sole-owner home must be a CPU tensor over its whole "
                          "storage");
    if (!home && !leaf->autograd) return 0;
    ddpl_autograd_meta *m = ddpl_autograd_meta_of(leaf);
    ddpl_tensor_retain(home);
    ddpl_tensor_release(m->grad_home);
    m->grad_home = home;
    m->grad_home_sole = home && sole_owner;
    return 0;
}

ddpl_tensor *ddpl_grad_home_of(const ddpl_tensor *leaf)
{
    return leaf->autograd ? leaf->autograd->grad_home : NULL;
}

/* The .grad kept in storage `kept` (the old home's) moves into home's memory: kept takes over
 * that memory (the values copied into it), home shares kept, and home's own storage object,
 * which now holds the old memory, is let go. */
static void move_grad_into(ddpl_storage *kept, ddpl_tensor *home)
{
    ddpl_storage *fresh = home->storage;
    if (fresh->data != kept->data) memcpy(fresh->data, kept->data, kept->nbytes);
    ddpl_storage_swap_memory(kept, fresh);
    ddpl_storage_retain(kept);
    home->storage = kept;
    ddpl_storage_release(fresh);
}

int ddpl_grad_home_replace(ddpl_tensor *leaf, ddpl_tensor *home, bool sole_owner)
{
    ddpl_autograd_meta *m = leaf->autograd;
    ddpl_tensor *old = m ? m->grad_home : NULL;
    ddpl_storage *kept = NULL; /* old's storage, when .grad lives there and moves along */
    if (old && old != home && m->grad_home_sole) {
        if (home && sole_owner && m->grad && m->grad->storage == old->storage &&
            home->storage->nbytes == old->storage->nbytes) {
            kept = old->storage;
            ddpl_storage_retain(kept);
        } else if (ddpl_tensor_take_memory(old) < 0) {
            return -1;
        }
    }
    int rc = ddpl_tensor_set_grad_home(leaf, home, sole_owner);
    if (kept) {
        if (rc == 0) move_grad_into(kept, home);
        ddpl_storage_release(kept);
    }
    return rc;
}

int ddpl_grad_home_prepare_write(ddpl_tensor *leaf)
{
    ddpl_autograd_meta *m = leaf->autograd;
    if (!m || !m->grad_home || !m->grad_home_sole) return 0;
    ddpl_tensor *home = m->grad_home;
    long expected = 1 + (m->grad && m->grad->storage == home->storage);
    if (atomic_load(&home->storage->refcount) <= expected) return 0;
    return ddpl_tensor_take_memory(home);
}
