#!/bin/sh
# tools/sass_stats.py on a listing written here in cuobjdump's format: a line a function with
# its counts (HGMMA shapes, WARPGROUP, R2UR, BRA.DIV, the uniform datapath's share), and with
# --loops the conditional back edge's loop, not the unconditional retry branch. Prints
# "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/x.sass" <<'SASS'
	code for sm_90a
		Function : kern_a
	.headerflags	@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   MOV R1, c[0x0][0x28] ;                         /* 0x00000a0000017a02 */
        /*0010*/                   R2UR UR4, R2 ;                                 /* 0x00000000020472ca */
        /*0020*/                   UIADD3 UR4, UR4, 0x1, URZ ;                    /* 0x0000000104047890 */
        /*0030*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT ; /* 0x01e00000041879f0 */
        /*0040*/                   WARPGROUP.ARRIVE ;                             /* 0x00000000000079c5 */
        /*0050*/              @!P0 BRA 0x10 ;                                     /* 0xfffffffc00e08947 */
        /*0060*/                   BRA.DIV UR4, 0x80 ;                            /* 0x0000000604047947 */
        /*0070*/                   BRA 0x20 ;                                     /* 0xfffffffc00e87947 */
        /*0080*/                   EXIT ;                                         /* 0x000000000000794d */
		Function : kern_b
        /*0000*/                   EXIT ;                                         /* 0x000000000000794d */
SASS
. tests/tools/check.sh
has() { grep -qxF "$1" "$tmp/out" || { echo "no line \"$1\" in"; cat "$tmp/out"; return 1; }; }
python3 tools/sass_stats.py --loops --min 2 "$tmp/x.sass" >"$tmp/out" 2>&1
a="kern_a: 9 instructions; HGMMA 1 HGMMA.64x128x16.F32.BF16; WARPGROUP 1; R2UR 1; BRA.DIV 1; BSSY 0;"
check "a function's counts" has "$a uniform datapath 11.1%"
check "the conditional back edge's loop" has \
  "  loop 0x10-0x50: 5 instructions: R2UR 1 UIADD3 1 HGMMA 1 WARPGROUP 1 BRA 1"
check "a function without wgmma" has \
  "kern_b: 1 instructions; HGMMA none; WARPGROUP 0; R2UR 0; BRA.DIV 0; BSSY 0; uniform datapath 0.0%"
one_loop() { [ "$(grep -c "^  loop" "$tmp/out")" -eq 1 ] || { cat "$tmp/out"; return 1; }; }
check "the retry branch is not a loop" one_loop
python3 tools/sass_stats.py <"$tmp/x.sass" >"$tmp/out" 2>&1
check "stdin, without --loops" has \
  "kern_b: 1 instructions; HGMMA none; WARPGROUP 0; R2UR 0; BRA.DIV 0; BSSY 0; uniform datapath 0.0%"
tally
