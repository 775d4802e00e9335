/* SPDX-License-Identifier: MIT */
/* Deliberately broken ABI v2 user kernels for the probe tests (tests/unit/tst_plugin_abi2.cpp); one
 * file, one library per -D. Each declares a softmax unless its flaw is in the declaration. */
#include <peat/kernel_abi.h>
#include <stddef.h>

#define FWD PEAT_VARIANT_BIT(PEAT_VARIANT_FORWARD)

#if defined(PEAT_BAD_V2_ZEROOPS)
static const peat_op_desc ops[] = {{PEAT_OP_SOFTMAX, FWD, PEAT_DTYPE_F32, PEAT_DTYPE_F32, 0}};
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "zero-ops", PEAT_MEMORY_HOST, 0, ops};
#elif defined(PEAT_BAD_V2_DUPOP)
static const peat_op_desc ops[] = {{PEAT_OP_SOFTMAX, FWD, PEAT_DTYPE_F32, PEAT_DTYPE_F32, 0},
                                   {PEAT_OP_SOFTMAX, FWD, PEAT_DTYPE_BF16, PEAT_DTYPE_F32, 0}};
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "dup-op", PEAT_MEMORY_HOST, 2, ops};
#elif defined(PEAT_BAD_V2_DTYPE)
static const peat_op_desc ops[] = {{PEAT_OP_SOFTMAX, FWD, 9, PEAT_DTYPE_F32, 0}};
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "dtype-9", PEAT_MEMORY_HOST, 1, ops};
#elif defined(PEAT_BAD_V2_DEVICE)
static const peat_op_desc ops[] = {{PEAT_OP_SOFTMAX, FWD, PEAT_DTYPE_F32, PEAT_DTYPE_F32, 0}};
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "device", PEAT_MEMORY_DEVICE, 1, ops};
#elif defined(PEAT_BAD_V2_NORUN) || defined(PEAT_BAD_V2_FAILING)
static const peat_op_desc ops[] = {{PEAT_OP_SOFTMAX, FWD, PEAT_DTYPE_F32, PEAT_DTYPE_F32, 0}};
static const peat_plugin_info info = {PEAT_KERNEL_ABI_VERSION, "no-run-or-failing", PEAT_MEMORY_HOST, 1, ops};
#else
#error "choose a broken plugin"
#endif

const peat_plugin_info* peat_kernel_info_v2(void) { return &info; }

#if defined(PEAT_BAD_V2_FAILING)
/* every call fails, with a reason */
int peat_kernel_run_v2(const peat_call* call) {
  (void)call;
  return 7;
}
const char* peat_kernel_last_error_v2(void) { return "no device found\n(cudaErrorNoDevice)"; }
#elif !defined(PEAT_BAD_V2_NORUN)
int peat_kernel_run_v2(const peat_call* call) {
  (void)call;
  return 0;
}
#endif
