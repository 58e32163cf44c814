// host/parts.h — a kernel file that the extension build compiles in parts.
//
// nvcc compiles a translation unit on one core, so a kernel file with many instances (wgmma_persistent.cu: tiles x
// element types x accumulations x A and B layouts x epilogues) would make the whole build wait for it. Such a file
// marks its code with `#if HGEMM_IN_PART(i)`: the build (ptx_kernels/build.py, `build_parts`) compiles it once for
// each part i it names, with -DHGEMM_PART=i, each on its own core, and links the parts together. Everywhere else
// (the offline tools and tests, ptx_kernels/toolchain.py) the file compiles whole, HGEMM_PART unset: one file holds
// one variant's instances, SASS and registration, as its record says.
// A launcher that one part calls and another holds has external linkage (outside the anonymous namespace), is
// declared `extern template` before its calls (so that a call does not instantiate its kernels there), and is
// explicitly instantiated inside its part's `#if`. Part 0 holds the rest of the file's host code and its
// registration.
#pragma once

#ifdef HGEMM_PART
#define HGEMM_IN_PART(i) (HGEMM_PART == (i))
#else
#define HGEMM_IN_PART(i) 1
#endif

// Where `compare inspect` compiles a whole file for the instances it shows (ptx_kernels/toolchain.py: only_flags
// sets HGEMM_ONLY_BF16 beside HGEMM_ONLY_ELEMENT, and HGEMM_ONLY_A_COL), a part's explicit instantiation of another
// element type or A layout is only declared: HGEMM_UNIT(BUILDS, EXTERN) is EXTERN where BUILDS is 1, `extern` where
// it is 0, and the builds are HGEMM_UNIT_HALF, HGEMM_UNIT_BF16 and HGEMM_UNIT_A_COL_true / _false (all 1 in the
// extension's build). A unit macro writes HGEMM_UNIT(HGEMM_UNIT_HALF, HGEMM_UNIT(HGEMM_UNIT_A_COL_##A_COL, EXTERN)).
#define HGEMM_UNIT_KEEP_1(EXTERN) EXTERN
#define HGEMM_UNIT_KEEP_0(EXTERN) extern
#define HGEMM_UNIT_KEEP_(BUILDS, EXTERN) HGEMM_UNIT_KEEP_##BUILDS(EXTERN)
#define HGEMM_UNIT(BUILDS, EXTERN) HGEMM_UNIT_KEEP_(BUILDS, EXTERN)
#if defined(HGEMM_ONLY_BF16) && HGEMM_ONLY_BF16
#define HGEMM_UNIT_HALF 0
#else
#define HGEMM_UNIT_HALF 1
#endif
#if defined(HGEMM_ONLY_BF16) && !HGEMM_ONLY_BF16
#define HGEMM_UNIT_BF16 0
#else
#define HGEMM_UNIT_BF16 1
#endif
#if defined(HGEMM_ONLY_A_COL) && HGEMM_ONLY_A_COL
#define HGEMM_UNIT_A_COL_false 0
#else
#define HGEMM_UNIT_A_COL_false 1
#endif
#if defined(HGEMM_ONLY_A_COL) && !HGEMM_ONLY_A_COL
#define HGEMM_UNIT_A_COL_true 0
#else
#define HGEMM_UNIT_A_COL_true 1
#endif
