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
