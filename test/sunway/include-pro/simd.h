/* The SW26010-Pro's CPE vector types and intrinsics, for swir's Sunway
 * dialect check of Pro projects: test tooling, never copied into a
 * generated project. Compiled as test/sunway/include/simd.h is (C99,
 * -pedantic-errors -Werror, -fsyntax-only; a call to an undeclared name is
 * an error), and written the same way: macros that check their operands as
 * strictly as C99 allows, prototypes where the real ones are functions.
 *
 * The Pro's simd.h is not public. This header declares what public Pro
 * code shows of it, each name with where ("swops": SYSU-SCC/swops,
 * slave.c, commit 01a5581, built with `swgcc -mslave -msimd
 * -faddress_align=64`; "heptagon": heptagonhust/CPC2023-Preliminary,
 * vector/vector_slave.c, commit 15aaac1; "cpc2022": Honeta/CPC2022,
 * matrix_solve/slave.c, commit 155504a), then, apart and marked ASSUMED, the names swir's
 * generated code uses that no public Pro code was found calling on the
 * 8-lane types: their SW26010 meaning (test/sunway/include/simd.h, the
 * public SW26010 header) lane by lane. docs/codegen.md, "Vector code
 * (simd.h)", lists both. The real header needs `swgcc -msimd`; so does
 * this one. */
#ifndef SWIR_SWGCC_CHECK_SIMD_H
#define SWIR_SWGCC_CHECK_SIMD_H

#ifndef __SWIR_SWGCC_MSIMD
#error "simd.h needs swgcc -msimd (the vector extensions are off without it)"
#endif

/* A vector passed by value has another ABI on the host without AVX-512;
 * the check compiles nothing, so the note is moot. */
#pragma GCC diagnostic ignored "-Wpsabi"

/* swops: `doublev8 vec_double; floatv8 vec_float;` (sw_slave_gemm_rrr_asm_cgn),
 * 8 elements per vector (`index += 8`); heptagon: `doublev8 p8, z8, beta8;`,
 * `#define SIMD_WIDTH 8`. 512 bits of doubles; a floatv8 is 8 floats (32
 * bytes in memory). */
typedef float floatv8 __attribute__((__vector_size__(32)));
typedef double doublev8 __attribute__((__vector_size__(64)));

/* `v` as an expression, after checking it is a vector (a scalar has no
 * subscript) of the same type as `w`. */
#define SWIR_CHECK_VECTOR(v) ((void)sizeof((v)[0]))
#define SWIR_CHECK_SAME(v, w) (SWIR_CHECK_VECTOR(v), SWIR_CHECK_VECTOR(w), 0 ? (v) : (w))

/* swops: simd_load(vec_double, local_C + i), simd_load(a1, origin_A +
 * index) and simd_store(a1, trans_A + index) on floatv8; heptagon:
 * simd_load(beta8, simd_arr) from a 64-byte aligned array, simd_loadu(r8,
 * r + off), simd_store(z8, z) once z is rounded up to 64 bytes,
 * simd_storeu(tmp8, x), all on doublev8; cpc2022: simd_load(datav8,
 * data + i) on doublev8 (calc_dma_simd). Dest first for the loads, the vector first for the
 * stores, as on the SW26010. */
#define simd_load(dest, src) ((void)(SWIR_CHECK_VECTOR(dest), \
        (dest) = *(const __typeof__(dest) *)(src)))
#define simd_loadu(dest, src) ((void)(SWIR_CHECK_VECTOR(dest), \
        (dest) = *(const __typeof__(dest) *)(src)))
#define simd_store(src, dest) ((void)(SWIR_CHECK_VECTOR(src), \
        *(__typeof__(src) *)(dest) = (src)))
#define simd_storeu(src, dest) ((void)(SWIR_CHECK_VECTOR(src), \
        *(__typeof__(src) *)(dest) = (src)))

/* heptagon (slave_MulReduceZR): simd_set_doublev8 with 8 doubles. */
extern doublev8 simd_set_doublev8(double a, double b, double c, double d,
                                  double e, double f, double g, double h);

/* heptagon: `p8 = simd_vmad(beta8, p8, z8)` (slave_MulAdd), `tmp8 =
 * simd_vnmad(z8, M8, g8)` (slave_MulSub). On doublev8: a*b+c, -a*b+c. */
extern doublev8 simd_vmad(doublev8 a, doublev8 b, doublev8 c);
extern doublev8 simd_vnmad(doublev8 a, doublev8 b, doublev8 c);

/* `+ - * /` and unary `-` on the vector types, lane by lane: GCC vector
 * arithmetic (swops: `vec_float = - (floatv8)vec_double`). */

/* ---- ASSUMED: used by swir's generated code, not found in public Pro
 * code on the 8-lane types. Each is the SW26010 header's intrinsic of the
 * same name with 8 lanes. ---- */

/* ASSUMED: simd_loade(x, y), the element at y in every lane of x (the
 * SW26010 header's macro over __builtin_sw64_lde, generic in the type).
 * Here: `src` points to an element of dest's type, not const. */
#define simd_loade(dest, src) ((void)(SWIR_CHECK_VECTOR(dest), \
        (void)sizeof((__typeof__((dest)[0]) *){0} = (src)), \
        (dest) = (__typeof__(dest)){*(src), *(src), *(src), *(src), \
                                    *(src), *(src), *(src), *(src)}))

/* ASSUMED: simd_set_floatv8, lane 0 first (as simd_set_doublev8). */
extern floatv8 simd_set_floatv8(float a, float b, float c, float d,
                                float e, float f, float g, float h);

/* ASSUMED: the floatv8 multiply-adds and the other doublev8 ones, named
 * as on the SW26010 (the doublev8 simd_vmad / simd_vnmad above keep
 * theirs). */
extern floatv8 simd_vmas(floatv8 a, floatv8 b, floatv8 c);
extern floatv8 simd_vmss(floatv8 a, floatv8 b, floatv8 c);
extern floatv8 simd_vnmas(floatv8 a, floatv8 b, floatv8 c);
extern floatv8 simd_vnmss(floatv8 a, floatv8 b, floatv8 c);
extern doublev8 simd_vmsd(doublev8 a, doublev8 b, doublev8 c);
extern doublev8 simd_vnmsd(doublev8 a, doublev8 b, doublev8 c);

/* ASSUMED: the compares (per lane 2.0 where x == y, x <= y, x < y, or the
 * pair is unordered, else 0.0) and the selects (per lane y where x == 0,
 * x < 0, x <= 0, else z), generic macros as in the SW26010 header. */
#define simd_vfcmpeq(x, y) SWIR_CHECK_SAME(x, y)
#define simd_vfcmple(x, y) SWIR_CHECK_SAME(x, y)
#define simd_vfcmplt(x, y) SWIR_CHECK_SAME(x, y)
#define simd_vfcmpun(x, y) SWIR_CHECK_SAME(x, y)
#define simd_vseleq(x, y, z) ((void)SWIR_CHECK_SAME(x, y), SWIR_CHECK_SAME(y, z))
#define simd_vsellt(x, y, z) ((void)SWIR_CHECK_SAME(x, y), SWIR_CHECK_SAME(y, z))
#define simd_vselle(x, y, z) ((void)SWIR_CHECK_SAME(x, y), SWIR_CHECK_SAME(y, z))

/* Not declared: the SW26010's floatv4 / doublev4 (no public Pro code uses
 * them) and register communication (simd_putr / _getr ...: the Pro has
 * RMA instead, declared in athread.h). */

#endif
