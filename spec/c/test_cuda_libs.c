/* spec/c/test_cuda_libs.c: what this build can open of NVIDIA's libraries (cuda/cuda_dynlib.c),
 * which needs no GPU: cuBLAS always, cuDNN and NCCL when configure found their headers
 * (ddpl/config.h). Opening checks every function the engine calls, so a misspelt or missing
 * name fails here rather than on the GPU machine; a library this build lacks must be refused
 * with a message saying how to get it. A build without CUDA has none of them: its set_device
 * must say so.
 * defines: main. */
#include "check.h"
#include "ddpl/config.h"

#if DDPL_HAVE_CUDA
#include "cuda/cuda_dynlib.h"

static bool has(const char *s, const char *part)
{
    return s && strstr(s, part) != NULL;
}

/* built: configure found the header, so the library must open here, where the toolkit (and
 * so the library beside it) is installed; else it must be refused by name, with the way out */
static void check_lib(cuda_lib lib, bool built, const char *name, const char *hint)
{
    int rc = cuda_lib_load(lib);
    if (built) {
        CHECK(rc == 0);
        CHECK(cuda_lib_load(lib) == 0); /* opened once, then kept */
    } else {
        CHECK(rc < 0);
        CHECK(has(ddpl_last_error(), "this build of ddplua has no"));
        CHECK(has(ddpl_last_error(), name));
        CHECK(has(ddpl_last_error(), hint));
    }
}

int main(void)
{
    check_lib(CUDA_LIB_CUBLAS, true, "cuBLAS", "");
    check_lib(CUDA_LIB_CUDNN, DDPL_HAVE_CUDNN, "cuDNN", "CUDNN_ROOT");
    check_lib(CUDA_LIB_NCCL, DDPL_HAVE_NCCL, "NCCL", "NCCL_ROOT");
    ddpl_cuda_version_info v;
    ddpl_cuda_versions(&v);
    CHECK((v.cudnn > 0) == DDPL_HAVE_CUDNN); /* 10000*major + 100*minor + patch */
    CHECK((v.nccl > 0) == DDPL_HAVE_NCCL);
    CHECK(v.runtime >= 11000);
    return check_finish();
}
#else
int main(void)
{
    CHECK(!ddpl_cuda_is_available());
    CHECK(ddpl_cuda_set_device(0) < 0);
    CHECK(strstr(ddpl_last_error(), "this build of ddplua has no CUDA backend") != NULL);
    return check_finish();
}
#endif
