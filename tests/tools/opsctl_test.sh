#!/bin/sh
# opsctl: each command's output, JSON that parses, exit status 2 for usage errors and 1 for
# calls the library refuses. Counts its checks in cmocka's summary format.
set -u
opsctl="$TEST_SRCDIR/opslib/tools/opsctl/opsctl"
passed=0
failed=0

check() { # check NAME WANT_STATUS NEEDLE -- ARGS...
  name="$1" want="$2" needle="$3"
  shift 4
  out=$("$opsctl" "$@" 2>&1)
  got=$?
  if [ "$got" -ne "$want" ] || ! printf '%s' "$out" | grep -qF -- "$needle"; then
    echo "FAILED: $name: exit $got (want $want), output lacks '$needle':"
    printf '%s\n' "$out" | head -20
    failed=$((failed + 1))
  else
    passed=$((passed + 1))
  fi
}

check_json() { # check_json NAME -- ARGS...
  name="$1"
  shift 2
  if "$opsctl" "$@" | python3 -c 'import json, sys; json.load(sys.stdin)'; then
    passed=$((passed + 1))
  else
    echo "FAILED: $name: output is not JSON"
    failed=$((failed + 1))
  fi
}

check "list" 0 "cpu_sdpa_ref" -- list
check "list --op" 0 "cpu_rmsnorm_ref" -- list --op rmsnorm
check "list: each warp role whole" 0 "consumers x8 warps: setmaxnreg 240: 64 query rows each, wgmma S and P V, online softmax, in a ring of turns" -- list --op sdpa
check "list --json: the roles array" 0 '"roles":[{"name":"producer","warps":4,' -- list --op sdpa --json
"$opsctl" list --op rmsnorm | grep -q cpu_sdpa_ref && { echo "FAILED: list --op rmsnorm shows sdpa"; failed=$((failed + 1)); }
check_json "list --json" -- list --json
check "explain sdpa sm_90" 0 "chosen: cuda_sdpa_sm90_d128" -- explain sdpa --dtype bf16 --q 2,4096,16,128 --k 2,4096,4,128 --causal --sm 90
check "explain sdpa sm_90 reason" 0 "runs on cpu, the handle's device is cuda" -- explain sdpa --q 2,4096,16,128 --k 2,4096,4,128 --sm 90
check "explain sdpa cpu" 0 "chosen: cpu_sdpa_ref" -- explain sdpa --q 2,128,16,64 --k 2,128,4,64 --window 32,0 --lse
check "explain sdpa problem" 0 "[window, gqa, lse]" -- explain sdpa --q 2,128,16,64 --k 2,128,4,64 --window 32,0 --lse
check_json "explain sdpa --json" -- explain sdpa --q 2,128,16,64 --k 2,128,4,64 --sm 80 --json
check "explain gemm" 0 "[bias, b_n_major]" -- explain gemm --a 4096,4096 --b 4096,4096 --bias --act gelu_tanh --dtype f16
check "explain gemm batched" 0 "batch=8 m=64 n=32 k=16" -- explain gemm --a 8,64,16 --b 16,32
check "explain rmsnorm" 0 "rows=16384 cols=4096" -- explain rmsnorm --x 16384,4096 --residual
check "explain reduce" 0 "outputs=3 reduced=20" -- explain reduce --x 4,3,5 --axes 0,2 --op mean
check "explain reduce columns on sm_90" 0 "* cuda_reduce_columns_cluster" -- explain reduce --x 16384,4096 --axes 0 --dtype bf16 --sm 90
check "explain reduce columns cluster needs sm_90" 0 "cuda_reduce_columns_cluster  id 906   sm_too_old" -- explain reduce --x 16384,4096 --axes 0 --dtype bf16 --sm 80
check "explain reduce columns cluster wide rows" 0 "cuda_reduce_columns_cluster  id 906   shape         needs outputs >= 4096, got 2048" -- explain reduce --x 16384,2048 --axes 0 --dtype bf16 --sm 90
check "explain binary" 0 "cpu_binary_ref" -- explain binary --a 4,1 --b 5 --op mul
check "explain binary broadcast" 0 "numel=20 ndim=2 inputs=2" -- explain binary --a 4,1 --b 5 --op mul
check "usage: no broadcast" 2 "shapes that do not broadcast" -- explain binary --a 4,2 --b 5
check "explain unary" 0 "variant=2" -- explain unary --x 7 --fn gelu_tanh
check "explain dropout" 0 "* cuda_dropout_vec16" -- explain dropout --x 16384,4096 --sm 90
check "explain layernorm_backward" 0 "rows=16384 cols=4096 [bias, dweight]" -- explain layernorm_backward --x 16384,4096 --dweight --dbias --sm 90
check "explain rmsnorm_backward long rows" 0 "* cuda_rmsnorm_backward_stream_vec16" -- explain rmsnorm_backward --x 4096,32768 --dweight --sm 90
check "explain rmsnorm_backward staged on sm_90" 0 "* cuda_rmsnorm_backward_staged" -- explain rmsnorm_backward --x 4096,16384 --dweight --sm 90
check "explain rmsnorm_backward staged row limit" 0 "cuda_rmsnorm_backward_staged id 1405  shape         needs cols <= 16384, got 32768" -- explain rmsnorm_backward --x 4096,32768 --dweight --sm 90
check "explain layernorm_backward staged is 16-bit" 0 "cuda_layernorm_backward_staged id 1305  dtype         takes f16, bf16, the input is f32" -- explain layernorm_backward --x 16384,4096 --dtype f32 --dweight --sm 90
check "explain layernorm_backward staged needs sm_90" 0 "cuda_layernorm_backward_staged id 1305  sm_too_old" -- explain layernorm_backward --x 16384,4096 --dweight --dbias --sm 80
check "explain softmax_backward" 0 "chosen: cpu_softmax_backward_ref" -- explain softmax_backward --x 64,1000
check_json "explain layernorm_backward --json" -- explain layernorm_backward --x 8,64 --dbias --json
check "explain rope on sm_90" 0 "* cuda_rope_vec16" -- explain rope --q 4096,32,128 --k 4096,8,128 --sm 90
check "explain rope names the style" 0 " style=gptj" -- explain rope --q 64,32,128 --gptj --sm 90
check "explain rope odd rotary" 0 "cuda_rope_vec16              id 1601  shape         needs rotary_dim a multiple of 16, got 24" -- explain rope --q 4096,32,128 --rotary 24 --sm 90
check "explain kv_cache_append with rope" 0 "tokens=4096 heads=8 head_dim=128 rotary_dim=128 heads_v=8 head_dim_v=128 style=neox [rope]" -- explain kv_cache_append --k 4096,8,128 --pages 512,16 --rope --sm 90
check "explain kv_cache_append bad rotary" 1 "params->rope->rotary_dim" -- explain kv_cache_append --k 16,2,7 --pages 4,4 --rope
check "fuse gemm,bias,gelu" 0 "applied  gemm_bias_act" -- fuse gemm,bias,gelu --m 8192 --n 4096 --k 4096 --cpu
check "fuse add,rmsnorm" 0 "applied  add_rmsnorm" -- fuse add,rmsnorm --cpu
check "fuse chain" 0 "ew_chain(3 steps)" -- fuse mul,add,sin --cpu
check "fuse attention" 0 "applied  attention_scale_mask" -- fuse gemm,scale,mask,softmax,gemm --m 512 --n 512 --k 64 --batch 4 --cpu
check "fuse on sm_90" 0 "cuda_gemm_sm90_128x256 runs it" -- fuse gemm,bias,gelu --sm 90
check_json "fuse --json" -- fuse gemm,bias,relu,add --cpu --json
check "usage: no command" 2 "usage:" --
check "usage: unknown command" 2 "unknown command 'frobnicate'" -- frobnicate
check "usage: unknown option" 2 "unknown option '--colour'" -- list --colour
check "usage: bad dims" 2 "--q: expected up to 4 non-negative integers" -- explain sdpa --q 2,x,16,128 --k 2,4096,4,128
check "usage: missing shape" 2 "explain sdpa needs --k" -- explain sdpa --q 2,4096,16,128
check "usage: unknown op" 2 "unknown op 'attention'" -- explain attention
check "usage: dtype" 2 "--dtype: expected f32, f16 or bf16, got 'fp64'" -- explain softmax --x 4,4 --dtype fp64
check "usage: sm" 2 "--sm: expected an SM version" -- explain softmax --x 4,4 --sm nine
check "usage: fuse node" 2 "unknown node 'dropout'" -- fuse gemm,dropout --cpu
check "library refuses" 1 "OPS_ERR_SHAPE_MISMATCH" -- explain sdpa --q 2,128,16,64 --k 2,128,4,32
check "library refuses heads" 1 "divisor of heads_q = 16" -- explain sdpa --q 2,128,16,64 --k 2,128,5,64
check "version" 0 "opsctl 0.1.0" -- version
check "help" 0 "opsctl fuse" -- help

# how a choice is made, the launch variants, and tune cache files
check "explain choice" 0 "(model: the cost model's lowest estimate: autotune is off" -- explain gemm --cpu --a 8,16 --b 16,8
check "explain plan" 0 "; plan: persistent pairs: clusters of 2 blocks" -- explain sdpa --q 2,4096,16,128 --k 2,4096,16,128 --sm 90
check "explain cluster" 0 "seqlen_q=384 makes 3 tiles of 128" -- explain sdpa --q 2,384,16,128 --k 2,384,16,128 --sm 90
check_json "explain choice --json" -- explain gemm --cpu --a 8,16 --b 16,8 --json
check "explain --tune-cache missing" 0 "tune cache /nonexistent-opsctl.tune: not found; ignoring it" -- explain gemm --cpu --a 8,16 --b 16,8 --tune-cache /nonexistent-opsctl.tune
check "tune-cache missing" 1 "cannot open /nonexistent-opsctl.tune" -- tune-cache /nonexistent-opsctl.tune
tune="${TEST_TMPDIR:-/tmp}/opsctl_test.tune"
printf 'opslib-tune-cache 1\nlibrary 0.1.0\nentry 00 cpu_gemm_panel 2 cpu_gemm_panel 10.500 cpu_gemm_ref 20.250 | gemm f32 -> f32 on cpu: batch=1 m=48\nend 1 0\n' > "$tune"
check "tune-cache lists" 0 "kept cpu_gemm_panel; timed cpu_gemm_panel 10.500 us, cpu_gemm_ref 20.250 us" -- tune-cache "$tune"
check "tune-cache bucket" 0 "  gemm f32 -> f32 on cpu: batch=1 m=48" -- tune-cache "$tune"
check "explain --tune-cache corrupt" 0 "corrupt (its checksum does not match its contents); ignoring it" -- explain gemm --cpu --a 8,16 --b 16,8 --tune-cache "$tune"

echo "[==========] opsctl: $((passed + failed)) checks"
if [ "$failed" -eq 0 ]; then
  echo "[  PASSED  ] $passed test(s)."
  exit 0
fi
echo "[  PASSED  ] $passed test(s)."
echo "[  FAILED  ] $failed test(s), listed below:"
exit 1
