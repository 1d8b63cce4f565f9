/* The CPE vector types and intrinsics of the Sunway toolchain's simd.h, for
 * swir's athread emulation: the same names, lane order and alignment rules,
 * built on the host compiler's vector extensions, so the generated vector code
 * runs here as written and a misaligned aligned access is a loud error.
 *
 * What the real header declares and the generated code uses (the public copy
 * of the SW26010 simd.h in qzwlecr/stencil-computation, include/simd.h; the
 * dialect check's test/sunway/include/simd.h cites each name):
 *   typedef float floatv4 __attribute__((__mode__(__V4SF__)));   4 x f32
 *   typedef double doublev4 __attribute__((__mode__(__V4DF__))); 4 x f64, 256 bits
 *   simd_load(dest, src) / simd_store(src, dest): aligned; simd_loadu /
 *   simd_storeu: any address; simd_loade(dest, src): the element at src in
 *   every lane; simd_set_floatv4(w, x, y, z): w is lane 0;
 *   simd_vmas / simd_vmss / simd_vnmas / simd_vnmss (floatv4) and simd_vmad /
 *   simd_vmsd / simd_vnmad / simd_vnmsd (doublev4): a*b+c, a*b-c, -a*b+c,
 *   -a*b-c; simd_vfcmpeq / le / lt / un (x, y): per lane 2.0 where x == y,
 *   x <= y, x < y, x and y unordered, else 0.0 (an unordered lt / le is
 *   false: openeuler-mirror/kernel, arch/sw_64/math-emu/math.c,
 *   simd_cmp_emul_d); simd_vseleq / vsellt / vselle (x, y, z): per lane y
 *   where x == 0, x < 0, x <= 0, else z (dxhisboy/lammps-sunway,
 *   pair_lj_cut_sw64.c); simd_putr / simd_putc (x, y) and x = simd_getr /
 *   simd_getc (x): register communication along the CPE's row / column
 *   (nushio3/swDNN, src/swConvForward.c; the runtime's buses, swir_emu.c);
 *   + - * / on the vector types lane by lane. The
 *   public header has no lane reduction and no vector max / min: neither
 *   does this one.
 *
 * The SW26010-Pro's 512-bit vectors (its simd.h is not public; what public
 * Pro code shows of it, used as shown):
 *   floatv8 (8 x f32) and doublev8 (8 x f64, 512 bits): SYSU-SCC/swops,
 *   slave.c (commit 01a5581): `doublev8 vec_double; floatv8 vec_float;`,
 *   simd_load(vec_double, local_C + i) from an ldm_malloc buffer, index += 8
 *   per vector, simd_load / simd_store of floatv8 (its SWAP_8_8 transpose,
 *   built with swgcc -faddress_align=64, README); heptagonhust/
 *   CPC2023-Preliminary, vector/vector_slave.c (commit 15aaac1): simd_load /
 *   simd_loadu / simd_store / simd_storeu of doublev8, simd_vmad and
 *   simd_vnmad on doublev8, simd_set_doublev8 with 8 arguments, a doublev8
 *   loaded aligned from `__thread_local double simd_arr[8]
 *   __attribute__((aligned(64)))` and stored aligned only once the pointer
 *   is rounded up to a multiple of 64 bytes; Honeta/CPC2022,
 *   matrix_solve/slave.c (commit 155504a): simd_load of doublev8.
 * Assumed for the Pro where public code is silent (docs/codegen.md, "Vector
 * code (simd.h)"):
 *   - an aligned access needs the vector's own size: 32 bytes for a
 *     floatv8, 64 for a doublev8 (heptagonhust's 64-byte rounding before an
 *     aligned doublev8 store agrees; no public Pro manual states it);
 *   - simd_loade, simd_set_floatv8, simd_vmas / vmss / vnmas / vnmss on
 *     floatv8, simd_vmsd / simd_vnmsd on doublev8, the compares and the
 *     selects exist on the 8-lane types with the SW26010's meaning, lane by
 *     lane; no public Pro code was found calling them.
 * One header serves both targets: the intrinsics below are generic in the
 * lane count, each checking its operands' element type.
 *
 * Assumed where the public sources are silent (docs/codegen.md, "Vector code"):
 *   - alignment: a doublev4 access needs 32 bytes (sunway.md: "aligned loads
 *     need 32-byte alignment"); a floatv4 access needs its own size, 16 bytes;
 *   - the multiply-adds round once (fused), each lane as fmaf / fma;
 *   - a select tests its condition lane as a floating-point value (-0.0 is
 *     zero, a NaN is not); the generated code selects only on compare
 *     results, 2.0 or 0.0, where the two readings agree. */
#ifndef SWIR_EMU_SIMD_H
#define SWIR_EMU_SIMD_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "swir_emu.h"

/* GCC notes that a 32- or 64-byte vector passed by value without AVX has another ABI
 * than with it; every file of the program is built with the same flags, so
 * the note is moot here (and on the CPE the vector registers are 256 bits).
 * Off for the rest of each file that includes this header, so code that
 * passes vectors to its own functions builds under -Werror too. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

/* Always inlined, as the real intrinsics are instructions: no out-of-line copy
 * passes a vector through the host ABI. */
#define SWIR_SIMD_INLINE static inline __attribute__((always_inline))

typedef float floatv4 __attribute__((vector_size(16)));
typedef double doublev4 __attribute__((vector_size(32)));
typedef int intv8 __attribute__((vector_size(32)));    /* declared as the real header does */
typedef float floatv8 __attribute__((vector_size(32)));     /* the SW26010-Pro's */
typedef double doublev8 __attribute__((vector_size(64)));

/* The lanes of vector `v`. */
#define SWIR_SIMD_LANES(v) ((int)(sizeof(v) / sizeof((v)[0])))
/* A compile-time error unless vector `v`'s lanes are of type `element`. */
#define SWIR_SIMD_ELEMENT_IS(v, element) \
    ((void)sizeof(char[__builtin_types_compatible_p(__typeof__((v)[0]), element) ? 1 : -1]))

/* An aligned access at `p` of a `bytes`-byte vector: anything else is the
 * error the real CPE raises (an unaligned-access exception). */
SWIR_SIMD_INLINE void swir_simd_aligned(const void *p, unsigned long bytes, const char *what)
{
    if ((uintptr_t)p % bytes != 0) {
        char message[160];
        snprintf(message, sizeof message,
                 "%s at %p: a %lu-byte vector access must be %lu-byte aligned "
                 "(simd_loadu / simd_storeu take any address)", what, p, bytes, bytes);
        swir_emu_trap(message);
    }
}

/* Each argument is evaluated once, as by the real macros over builtins. */
#define simd_load(dest, src) __extension__ ({                                  \
        const void *swir_simd_at = (src);                                       \
        swir_simd_aligned(swir_simd_at, sizeof(dest), "simd_load");             \
        memcpy(&(dest), swir_simd_at, sizeof(dest));                            \
        (dest); })
#define simd_loadu(dest, src) __extension__ ({                                 \
        const void *swir_simd_at = (src);                                       \
        memcpy(&(dest), swir_simd_at, sizeof(dest));                            \
        (dest); })
/* The element at `src` in every lane of `dest`; `src` points to an element
 * of dest's type (a misaligned one is already undefined in C). */
#define simd_loade(dest, src) __extension__ ({                                 \
        const __typeof__((dest)[0]) swir_simd_element = *(src);                 \
        __typeof__(dest) swir_simd_splat;                                       \
        for (int i = 0; i < SWIR_SIMD_LANES(swir_simd_splat); i++)              \
            swir_simd_splat[i] = swir_simd_element;                             \
        (dest) = swir_simd_splat; })
#define simd_store(src, dest) __extension__ ({                                 \
        __typeof__(src) swir_simd_value = (src);                                \
        void *swir_simd_at = (dest);                                            \
        swir_simd_aligned(swir_simd_at, sizeof swir_simd_value, "simd_store");  \
        memcpy(swir_simd_at, &swir_simd_value, sizeof swir_simd_value); })
#define simd_storeu(src, dest) __extension__ ({                                \
        __typeof__(src) swir_simd_value = (src);                                \
        memcpy((dest), &swir_simd_value, sizeof swir_simd_value); })

SWIR_SIMD_INLINE floatv4 simd_set_floatv4(float w, float x, float y, float z)
{
    floatv4 v = {w, x, y, z};
    return v;
}

SWIR_SIMD_INLINE doublev4 simd_set_doublev4(double w, double x, double y, double z)
{
    doublev4 v = {w, x, y, z};
    return v;
}

/* The Pro's: lane 0 first, as simd_set_doublev4 (heptagonhust's
 * simd_set_doublev8 calls pass the lanes in order of their elements). */
SWIR_SIMD_INLINE floatv8 simd_set_floatv8(float a, float b, float c, float d,
                                          float e, float f, float g, float h)
{
    floatv8 v = {a, b, c, d, e, f, g, h};
    return v;
}

SWIR_SIMD_INLINE doublev8 simd_set_doublev8(double a, double b, double c, double d,
                                            double e, double f, double g, double h)
{
    doublev8 v = {a, b, c, d, e, f, g, h};
    return v;
}

/* A fused multiply-add per lane, rounded once (fmaf / fma by `element`):
 * (-)a*b (+/-)c, the signs chosen by `neg_ab` and `neg_c` (0 or 1); a, b
 * and c of one vector type of `element` lanes (4 or 8). */
#define SWIR_SIMD_FMA_float fmaf
#define SWIR_SIMD_FMA_double fma
#define SWIR_SIMD_FMA(element, a, b, c, neg_ab, neg_c) __extension__ ({          \
        __typeof__(a) swir_a = (a), swir_b = (b), swir_c = (c), swir_r;         \
        SWIR_SIMD_ELEMENT_IS(swir_a, element);                                  \
        for (int i = 0; i < SWIR_SIMD_LANES(swir_r); i++)                       \
            swir_r[i] = SWIR_SIMD_FMA_##element(neg_ab ? -swir_a[i] : swir_a[i], \
                                                swir_b[i],                      \
                                                neg_c ? -swir_c[i] : swir_c[i]); \
        swir_r; })

/* Fused multiply-adds, lane by lane: a*b+c, a*b-c, -a*b+c, -a*b-c. */
#define simd_vmas(a, b, c) SWIR_SIMD_FMA(float, a, b, c, 0, 0)
#define simd_vmss(a, b, c) SWIR_SIMD_FMA(float, a, b, c, 0, 1)
#define simd_vnmas(a, b, c) SWIR_SIMD_FMA(float, a, b, c, 1, 0)
#define simd_vnmss(a, b, c) SWIR_SIMD_FMA(float, a, b, c, 1, 1)
#define simd_vmad(a, b, c) SWIR_SIMD_FMA(double, a, b, c, 0, 0)
#define simd_vmsd(a, b, c) SWIR_SIMD_FMA(double, a, b, c, 0, 1)
#define simd_vnmad(a, b, c) SWIR_SIMD_FMA(double, a, b, c, 1, 0)
#define simd_vnmsd(a, b, c) SWIR_SIMD_FMA(double, a, b, c, 1, 1)

/* Per lane, 2.0 where `test` holds of swir_x[i] and swir_y[i], else 0.0
 * (the compare's true and false values); x and y of one vector type. */
#define SWIR_SIMD_COMPARE(x, y, test) __extension__ ({                          \
        __typeof__(x) swir_x = (x), swir_y = (y), swir_r;                       \
        for (int i = 0; i < SWIR_SIMD_LANES(swir_r); i++)                       \
            swir_r[i] = (test) ? 2 : 0;                                         \
        swir_r; })
/* C's < and <= are false on an unordered pair, as the SW64 instructions. */
#define simd_vfcmpeq(x, y) SWIR_SIMD_COMPARE(x, y, swir_x[i] == swir_y[i])
#define simd_vfcmple(x, y) SWIR_SIMD_COMPARE(x, y, swir_x[i] <= swir_y[i])
#define simd_vfcmplt(x, y) SWIR_SIMD_COMPARE(x, y, swir_x[i] < swir_y[i])
#define simd_vfcmpun(x, y) SWIR_SIMD_COMPARE(x, y, swir_x[i] != swir_x[i] || swir_y[i] != swir_y[i])

/* Per lane, y where `test` holds of the condition lane swir_c[i], else z;
 * all three of one vector type. */
#define SWIR_SIMD_SELECT(x, y, z, test) __extension__ ({                        \
        __typeof__(y) swir_c = (x), swir_y = (y), swir_z = (z), swir_r;         \
        for (int i = 0; i < SWIR_SIMD_LANES(swir_r); i++)                       \
            swir_r[i] = (test) ? swir_y[i] : swir_z[i];                         \
        swir_r; })
#define simd_vseleq(x, y, z) SWIR_SIMD_SELECT(x, y, z, swir_c[i] == 0)
#define simd_vsellt(x, y, z) SWIR_SIMD_SELECT(x, y, z, swir_c[i] < 0)
#define simd_vselle(x, y, z) SWIR_SIMD_SELECT(x, y, z, swir_c[i] <= 0)

/* Register communication (the public simd.h's SW5 part: macros over
 * __builtin_sw64_putR / _putC / _getxR / _getxC; used so in nushio3/swDNN,
 * src/swConvForward.c): simd_putr(x, y) / simd_putc(x, y) send vector x to
 * place y of this CPE's row / column (8: all the others), x = simd_getr(x) /
 * simd_getc(x) receive the next vector from it (x gives only the type; it is
 * not read). The buses are the runtime's (swir_emu.c, "register
 * communication"). */
#define simd_putr(x, y) __extension__ ({                                       \
        __typeof__(x) swir_reg_vector = (x);                                    \
        swir_emu_reg_put(0, &swir_reg_vector, sizeof swir_reg_vector, (y)); })
#define simd_putc(x, y) __extension__ ({                                       \
        __typeof__(x) swir_reg_vector = (x);                                    \
        swir_emu_reg_put(1, &swir_reg_vector, sizeof swir_reg_vector, (y)); })
#define simd_getr(x) __extension__ ({                                          \
        __typeof__(x) swir_reg_vector;                                          \
        swir_emu_reg_get(0, &swir_reg_vector, sizeof swir_reg_vector);          \
        swir_reg_vector; })
#define simd_getc(x) __extension__ ({                                          \
        __typeof__(x) swir_reg_vector;                                          \
        swir_emu_reg_get(1, &swir_reg_vector, sizeof swir_reg_vector);          \
        swir_reg_vector; })

#endif /* SWIR_EMU_SIMD_H */
