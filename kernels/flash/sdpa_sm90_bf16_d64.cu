/* The Hopper attention forward (sdpa_sm90.cuh), bf16, head dims up to 64. */
#include "kernels/flash/sdpa_sm90.cuh"

OPSI_SDPA_SM90_INSTANTIATE(__nv_bfloat16, 64, 1)
