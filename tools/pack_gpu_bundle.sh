#!/bin/sh
# Packs every test and benchmark binary (plus the examples), stripped, libopslib.so with the
# Python binding and its tests, bench/compare.py, and the shared
# libraries they need that a GPU host may lack (Debian's cmocka, Google Benchmark), into
# one self-contained folder with a runner. The GPU host needs a driver, nothing else:
# CUDA's runtime is linked statically.
#
#   tools/pack_gpu_bundle.sh [--archs sm_90a] [OUT_DIR]      (default OUT_DIR: gpu_bundle)
#   OUT_DIR/run_all.sh [--sanitizer] [--bench] [--filter REGEX]
#   OUT_DIR/jobs.sh JOB[@SECONDS]...   (the same runs in pieces under time limits; see its header)
#
# Every binary embeds every kernel, so the folder is large (tens of MB); it also comes as
# one xz archive, gpu_carry/bundle.tar.xz (a few MB: the binaries share most of their
# bytes), for hosts reached through a size-capped copy:
#   tar xJf gpu_carry/bundle.tar.xz && gpu_bundle/run_all.sh --sanitizer --bench
#
# The default arch list is sm_90a alone: the H100 runs it, and every binary stays small.
set -eu
cd "$(dirname "$0")/.."
archs="sm_90a"
if [ "${1:-}" = "--archs" ]; then archs="$2"; shift 2; fi
out="${1:-gpu_bundle}"

tools/setup.sh
flags="--//tools/bazel:cuda_archs=$archs"
# the thread soak is CPU-only and built with ThreadSanitizer: CI runs it, the bundle need not
tests=$(bazel query --noshow_progress 'kind("cc_test", //tests/...) except //tests/soak/...' 2>/dev/null)
benches=$(bazel query --noshow_progress 'kind("cc_binary", //bench/...)' 2>/dev/null || true)
bazel build --noshow_progress $flags $tests $benches //examples:sdpa_demo //examples:decode_loop //:libopslib.so
bin=$(bazel info $flags bazel-bin 2>/dev/null)

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for label in $tests $benches //examples:sdpa_demo //examples:decode_loop; do
  path=$(echo "$label" | sed 's|^//||; s|:|/|')
  name=$(echo "$label" | sed 's|^//||; s|[/:]|_|g')
  cp "$bin/$path" "$out/bin/$name"
  chmod u+w "$out/bin/$name"
  strip --strip-unneeded "$out/bin/$name"
done
# Shared libraries outside glibc / libstdc++ / libgcc, which every Linux host has.
for f in "$out"/bin/*; do
  ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libstdc++.so*|libgcc_s.so*|ld-linux*) ;;
    # cuBLAS (gemm_bench's comparison): hundreds of MB; run_all.sh finds the host's toolkit copy
    libcublas*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
# The Python binding over the shared library, its tests, and the PyTorch comparison.
cp "$bin/libopslib.so" "$out/lib/"
chmod u+w "$out/lib/libopslib.so"
strip --strip-unneeded "$out/lib/libopslib.so"
mkdir -p "$out/python/opslib" "$out/python/tests" "$out/include/opslib"
cp python/opslib/*.py python/opslib/_ext.c "$out/python/opslib/"
cp include/opslib/*.h "$out/include/opslib/"   # opslib._ext is built there, for its Python
cp python/tests/*.py "$out/python/tests/"
cp tools/bundle_run_all.sh "$out/run_all.sh"
cp tools/bundle_jobs.sh "$out/jobs.sh"   # the same runs as named jobs, for hosts that time-limit a command
cp tools/count_bundle.py "$out/count_bundle.py"
cp bench/compare.py "$out/"   # same-run comparison with PyTorch, where the host has it
cp bench/sweep.py "$out/"     # the workload sweep (every eligible kernel, the choice, PyTorch)
cp bench/gemm_grid.py "$out/"  # issue 26's GEMM grid: the choice beside torch.matmul
cp bench/attn_grid.py "$out/"  # issue 26's attention grid: the choice beside flash / cuDNN
cp bench/host_cost.py "$out/" # host time per call: the C path, the ctypes path, PyTorch
cp bench/host_launch.cu "$out/" # host time per call from C, beside the launches it is made of
cp bench/sdpa_bwd_small.py "$out/" # the attention backward on small shapes, pinned or not
cp bench/append_one.py "$out/"  # one kv_cache_append call for ncu (the cache family's shape)
cp examples/llama_block.py "$out/"  # a decoder block with opslib.torch, beside PyTorch's
chmod +x "$out/run_all.sh" "$out/jobs.sh"
echo "archs=$archs built=$(date -u +%Y-%m-%dT%H:%MZ) commit=$(git rev-parse --short HEAD 2>/dev/null || echo none)" > "$out/BUILD_INFO"
mkdir -p gpu_carry
tar cf - "$out" | xz -6e --lzma2=dict=128MiB > gpu_carry/bundle.tar.xz
du -sh "$out" gpu_carry/bundle.tar.xz
ls "$out/bin" "$out/lib"
