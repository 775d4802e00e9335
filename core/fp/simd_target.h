// SPDX-License-Identifier: MIT
// The shared preamble of the core's Highway files (*_simd.cpp). Each such file defines
// HWY_TARGET_INCLUDE as its own path and then includes this header; Highway's foreach_target
// re-includes that file once per SIMD target, and so this header too (deliberately without an
// include guard around the two Highway includes, which guard themselves).
//   PEAT_SIMD_BEGIN(peat::x::detail) opens the per-target namespace (with hn = hwy::HWY_NAMESPACE);
//   PEAT_SIMD_END closes it again. Both expand where they are used, so under each target's macros.
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef PEAT_CORE_FP_SIMD_TARGET_H
#define PEAT_CORE_FP_SIMD_TARGET_H

#define PEAT_SIMD_BEGIN(ns)  \
  HWY_BEFORE_NAMESPACE();    \
  namespace ns {             \
  namespace HWY_NAMESPACE {  \
  namespace hn = hwy::HWY_NAMESPACE;

#define PEAT_SIMD_END \
  }                   \
  }                   \
  HWY_AFTER_NAMESPACE();

#endif  // PEAT_CORE_FP_SIMD_TARGET_H
