/* Name RVV f32 types and intrinsics by the LMUL macro (1, 2, 4 or 8). */
#ifndef RVV_LMUL_H
#define RVV_LMUL_H
#include <riscv_vector.h>
#ifndef LMUL
#define LMUL 1
#endif
#define EOK_CAT3_(a, b, c) a##b##c
#define EOK_CAT3(a, b, c) EOK_CAT3_(a, b, c)
#define VF32 EOK_CAT3(vfloat32m, LMUL, _t)
#define VSETVL EOK_CAT3(__riscv_vsetvl_e32m, LMUL, )
#define VSETVLMAX EOK_CAT3(__riscv_vsetvlmax_e32m, LMUL, )
#define VLE32 EOK_CAT3(__riscv_vle32_v_f32m, LMUL, )
#define VSE32 EOK_CAT3(__riscv_vse32_v_f32m, LMUL, )
#define VFMACC_VV EOK_CAT3(__riscv_vfmacc_vv_f32m, LMUL, )
#define VFMACC_VV_TU EOK_CAT3(__riscv_vfmacc_vv_f32m, LMUL, _tu)
#define VFMACC_VF EOK_CAT3(__riscv_vfmacc_vf_f32m, LMUL, )
#define VFADD_VV EOK_CAT3(__riscv_vfadd_vv_f32m, LMUL, )
#define VFMV_V_F EOK_CAT3(__riscv_vfmv_v_f_f32m, LMUL, )
#define VFREDUSUM EOK_CAT3(EOK_CAT3(__riscv_vfredusum_vs_f32m, LMUL, _f32m1), , )
#endif
