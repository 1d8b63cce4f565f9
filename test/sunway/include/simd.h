/* The CPE vector types and intrinsics, for swir's Sunway dialect check
 * (test/sunway/sw5cc): test tooling, never copied into a generated project.
 *
 * The types as public copies of the SW26010 simd.h declare them (vector modes
 * of float, double and int), the intrinsics the generated code calls with the
 * real header's argument and result types. simd_load / simd_store are macros
 * over compiler builtins in the real header: here they check that the vector
 * is an lvalue and the address a pointer. The real header needs `sw5cc -msimd`;
 * so does this one. */
#ifndef SWIR_SW5CC_CHECK_SIMD_H
#define SWIR_SW5CC_CHECK_SIMD_H

#ifndef __SWIR_SW5CC_MSIMD
#error "simd.h needs sw5cc -msimd (the vector extensions are off without it)"
#endif

/* A vector passed by value has another ABI on the host without AVX; the
 * check compiles nothing, so the note is moot. */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float floatv4 __attribute__((__vector_size__(16)));
typedef double doublev4 __attribute__((__vector_size__(32)));
typedef int intv8 __attribute__((__vector_size__(32)));

#define simd_load(dest, src) ((void)((dest) = *(const __typeof__(dest) *)(src)))
#define simd_loadu(dest, src) ((void)((dest) = *(const __typeof__(dest) *)(src)))
#define simd_store(src, dest) ((void)(*(__typeof__(src) *)(dest) = (src)))
#define simd_storeu(src, dest) ((void)(*(__typeof__(src) *)(dest) = (src)))

extern floatv4 simd_set_floatv4(float w, float x, float y, float z);
extern doublev4 simd_set_doublev4(double w, double x, double y, double z);
extern floatv4 simd_vmas(floatv4 a, floatv4 b, floatv4 c);
extern floatv4 simd_vmss(floatv4 a, floatv4 b, floatv4 c);
extern floatv4 simd_vnmas(floatv4 a, floatv4 b, floatv4 c);
extern floatv4 simd_vnmss(floatv4 a, floatv4 b, floatv4 c);
extern doublev4 simd_vmad(doublev4 a, doublev4 b, doublev4 c);
extern doublev4 simd_vmsd(doublev4 a, doublev4 b, doublev4 c);
extern doublev4 simd_vnmad(doublev4 a, doublev4 b, doublev4 c);
extern doublev4 simd_vnmsd(doublev4 a, doublev4 b, doublev4 c);
extern float simd_reduc_pluss(floatv4 a);
extern double simd_reduc_plusd(doublev4 a);
extern floatv4 simd_smaxs(floatv4 a, floatv4 b);
extern floatv4 simd_smins(floatv4 a, floatv4 b);
extern doublev4 simd_smaxd(doublev4 a, doublev4 b);
extern doublev4 simd_smind(doublev4 a, doublev4 b);

#endif
