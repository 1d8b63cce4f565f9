/* The CPE vector types and intrinsics, for swir's Sunway dialect check
 * (test/sunway/sw5cc): test tooling, never copied into a generated project.
 *
 * It declares only what public SW26010 code shows to exist, each name with
 * where: "header" is the public copy of the SW26010 simd.h in
 * qzwlecr/stencil-computation, include/simd.h (its SW5 part, the SW26010's);
 * a use is cited by repository, file and function. Generated code may call
 * nothing else: sw5cc compiles with -pedantic-errors -Werror in C99, where a
 * call to an undeclared function is an error, so a name missing here fails
 * the check (test/unit/test_sunway_build.py,
 * test_generated_code_calls_only_the_declared_intrinsics, also lists them).
 * Left out on purpose: simd_reduc_pluss / _plusd and simd_smaxs / _smins /
 * _smaxd / _smind, absent from that header (simd_smaxs appears only in a
 * later generation's host header).
 *
 * The real intrinsics are macros over compiler builtins, generic in the
 * vector type; here they are macros that check the operands as strictly as
 * C99 allows (a vector where a vector is expected, both operands of one
 * type) and give a value of the right type. The check compiles with
 * -fsyntax-only: what the values are does not matter. The real header needs
 * `sw5cc -msimd`; so does this one. */
#ifndef SWIR_SW5CC_CHECK_SIMD_H
#define SWIR_SW5CC_CHECK_SIMD_H

#ifndef __SWIR_SW5CC_MSIMD
#error "simd.h needs sw5cc -msimd (the vector extensions are off without it)"
#endif

/* A vector passed by value has another ABI on the host without AVX; the
 * check compiles nothing, so the note is moot. */
#pragma GCC diagnostic ignored "-Wpsabi"

/* header: the SW5 typedefs, modes __V4SF__, __V4DF__, __V8SI__. */
typedef float floatv4 __attribute__((__vector_size__(16)));
typedef double doublev4 __attribute__((__vector_size__(32)));
typedef int intv8 __attribute__((__vector_size__(32)));

/* `v` as an expression, after checking it is a vector (a scalar has no
 * subscript) of the same type as `w`. */
#define SWIR_CHECK_VECTOR(v) ((void)sizeof((v)[0]))
#define SWIR_CHECK_SAME(v, w) (SWIR_CHECK_VECTOR(v), SWIR_CHECK_VECTOR(w), 0 ? (v) : (w))

/* header: simd_load / simd_loadu / simd_store / simd_storeu, macros over
 * __builtin_sw64_load / _loadu / _store / _storeu (dest first for the loads,
 * the vector first for the stores). Here: the vector an lvalue, the address
 * a pointer. */
#define simd_load(dest, src) ((void)(SWIR_CHECK_VECTOR(dest), \
        (dest) = *(const __typeof__(dest) *)(src)))
#define simd_loadu(dest, src) ((void)(SWIR_CHECK_VECTOR(dest), \
        (dest) = *(const __typeof__(dest) *)(src)))
#define simd_store(src, dest) ((void)(SWIR_CHECK_VECTOR(src), \
        *(__typeof__(src) *)(dest) = (src)))
#define simd_storeu(src, dest) ((void)(SWIR_CHECK_VECTOR(src), \
        *(__typeof__(src) *)(dest) = (src)))

/* header: simd_loade(x, y), over __builtin_sw64_lde: the element at y in
 * every lane of x. Used to splat a float into a floatv4 in SWCaffe-style
 * GEMM kernels (e.g. `simd_loade(tmp_weight[0], weight_ptr)`, ldm_sgemm_small
 * in a public swCaffe gemm.c) and a double into a doublev4 in swCaffe's
 * sw_slave_scale.c (sw_slave_scale_d). Here: `src` points to an element of
 * dest's type (a float for a floatv4), not const (the builtin's operand). */
#define simd_loade(dest, src) ((void)(SWIR_CHECK_VECTOR(dest), \
        (void)sizeof((__typeof__((dest)[0]) *){0} = (src)), \
        (dest) = (__typeof__(dest)){*(src), *(src), *(src), *(src)}))

/* header: simd_set_floatv4 / simd_set_doublev4 (static inline, w in lane 0;
 * four stores to a union and a vector load). */
extern floatv4 simd_set_floatv4(float w, float x, float y, float z);
extern doublev4 simd_set_doublev4(double w, double x, double y, double z);

/* header: the SW5 multiply-adds (static inline over __builtin_sw64_vmas ...):
 * a*b+c, a*b-c, -a*b+c, -a*b-c. */
extern floatv4 simd_vmas(floatv4 a, floatv4 b, floatv4 c);
extern floatv4 simd_vmss(floatv4 a, floatv4 b, floatv4 c);
extern floatv4 simd_vnmas(floatv4 a, floatv4 b, floatv4 c);
extern floatv4 simd_vnmss(floatv4 a, floatv4 b, floatv4 c);
extern doublev4 simd_vmad(doublev4 a, doublev4 b, doublev4 c);
extern doublev4 simd_vmsd(doublev4 a, doublev4 b, doublev4 c);
extern doublev4 simd_vnmad(doublev4 a, doublev4 b, doublev4 c);
extern doublev4 simd_vnmsd(doublev4 a, doublev4 b, doublev4 c);

/* header: simd_vfcmpeq / vfcmple / vfcmplt / vfcmpun (x, y), macros over
 * __builtin_sw64_fcmpeq ...: per lane 2.0 where x == y, x <= y, x < y, or x
 * and y unordered, 0.0 elsewhere (openeuler-mirror/kernel,
 * arch/sw_64/math-emu/math.c, simd_cmp_emul_d: the result 0x4000000000000000
 * or 0). Used in dxhisboy/lammps-sunway, pair_lj_cut_sw64.c
 * (pair_lj_cut_sunway_compute_para_vec: `simd_vfcmple(jlist_cutsq_v4,
 * rsq_v4)`). */
#define simd_vfcmpeq(x, y) SWIR_CHECK_SAME(x, y)
#define simd_vfcmple(x, y) SWIR_CHECK_SAME(x, y)
#define simd_vfcmplt(x, y) SWIR_CHECK_SAME(x, y)
#define simd_vfcmpun(x, y) SWIR_CHECK_SAME(x, y)

/* header: simd_vseleq / vsellt / vselle (x, y, z), macros over
 * __builtin_sw64_sleq ...: per lane y where x == 0, x < 0, x <= 0, else z.
 * Used so in dxhisboy/lammps-sunway, pair_lj_cut_sw64.c
 * (pair_lj_cut_sunway_compute_para_vec: `fpair_v4 = simd_vselle(msk_v4,
 * fpair_v4, v4_0)` keeps the force where the vfcmple mask is 0). */
#define simd_vseleq(x, y, z) ((void)SWIR_CHECK_SAME(x, y), SWIR_CHECK_SAME(y, z))
#define simd_vsellt(x, y, z) ((void)SWIR_CHECK_SAME(x, y), SWIR_CHECK_SAME(y, z))
#define simd_vselle(x, y, z) ((void)SWIR_CHECK_SAME(x, y), SWIR_CHECK_SAME(y, z))

/* header: simd_putr / simd_putc (x, y) and simd_getr / simd_getc (x), in its
 * SW5 part, macros over __builtin_sw64_putR / _putC / _getxR / _getxC:
 * register communication, vector x sent to place y of the CPE's row /
 * column (8: all the others of it), or the next vector received from it (x
 * only gives the type). Used so in nushio3/swDNN, src/swConvForward.c
 * (convforward_p_simd_rc_c: `simd_putr(tmp_weight[0], 8)`,
 * `tmp_input[0] = simd_getc(tmp_input[0])`). Here: x a vector, y an integer
 * (a shift needs one); a receive gives a value of x's type without reading x. */
#define simd_putr(x, y) ((void)SWIR_CHECK_VECTOR(x), (void)(x), (void)(0 << (y)))
#define simd_putc(x, y) ((void)SWIR_CHECK_VECTOR(x), (void)(x), (void)(0 << (y)))
#define simd_getr(x) (SWIR_CHECK_VECTOR(x), (__typeof__(x)){0, 0, 0, 0})
#define simd_getc(x) (SWIR_CHECK_VECTOR(x), (__typeof__(x)){0, 0, 0, 0})

/* `+ - * /` on the vector types, lane by lane: GCC vector arithmetic, which
 * the public CPE code relies on (e.g. `r6inv_v4 * (jlist_lj_v4[0] * r6inv_v4
 * - jlist_lj_v4[1])` in the lammps-sunway function above). */

#endif
