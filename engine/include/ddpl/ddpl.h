/* ddpl/ddpl.h: the public C API of ddplua (placeholder; tutorial written with the bindings). */
#ifndef DDPL_H
#define DDPL_H
#include "ddpl/config.h"
#include "tensor.h"
#include "ops.h"
#include "autograd.h"
#endif
