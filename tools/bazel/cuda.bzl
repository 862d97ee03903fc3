"""CUDA for Bazel 4.2 with no network: nvcc called from a small Starlark rule.

cuda_library(name, srcs = [...], deps = [...]) compiles each .cu file to one object with
nvcc, once per architecture in --//tools/bazel:cuda_archs, and wraps the objects in a
cc_library so they link like C code. Each object also gets a register / shared-memory
report from `ptxas -v` (output group "resources"; tools/resource_report.sh prints them).
"""

# nvcc finds cicc, ptxas and its headers relative to its own real path, so it is called
# where the toolkit is installed rather than through Bazel's symlinked @cuda repository.
_NVCC = "/usr/local/cuda/bin/nvcc"

BuildSettingValue = provider(fields = ["value"])

def _flag_impl(ctx):
    return [BuildSettingValue(value = ctx.build_setting_value)]

string_flag = rule(implementation = _flag_impl, build_setting = config.string(flag = True))
bool_flag = rule(implementation = _flag_impl, build_setting = config.bool(flag = True))

def _gencode_flags(archs):
    flags = []
    for arch in archs.split(","):
        arch = arch.strip()
        if not arch:
            continue
        if not arch.startswith("sm_"):
            fail("cuda_archs: expected names like sm_80 or sm_90a, got '%s'" % arch)
        num = arch[len("sm_"):]
        flags.append("-gencode=arch=compute_%s,code=sm_%s" % (num, num))
    if not flags:
        fail("cuda_archs is empty")
    return flags

def _cuda_object_impl(ctx):
    src = ctx.file.src
    obj = ctx.actions.declare_file(ctx.label.name + ".o")
    report = ctx.actions.declare_file(ctx.label.name + ".resources.txt")

    headers = []
    includes = []
    for dep in ctx.attr.deps:
        cc = dep[CcInfo].compilation_context
        headers.append(cc.headers)
        includes += cc.includes.to_list() + cc.quote_includes.to_list() + cc.system_includes.to_list()

    args = ctx.actions.args()
    args.add(_NVCC)
    args.add(report)
    args.add_all(["-c", src.path, "-o", obj.path])
    args.add_all(["-std=c++17", "-O3", "-DNDEBUG", "-Xcompiler", "-fPIC", "-Xptxas", "-v"])
    args.add_all(["--expt-relaxed-constexpr", "-Werror", "all-warnings"])
    # compressed device code: about 4x smaller binaries (each one embeds every kernel)
    args.add("-Xfatbin=-compress-all")
    if ctx.attr._lineinfo[BuildSettingValue].value:
        args.add("-lineinfo")
    args.add_all(_gencode_flags(ctx.attr._archs[BuildSettingValue].value))
    args.add_all(["-I."] + ["-I" + i for i in includes])
    args.add_all(ctx.attr.copts)

    ctx.actions.run(
        executable = ctx.executable._wrapper,
        arguments = [args],
        inputs = depset([src] + ctx.files.hdrs, transitive = headers),
        outputs = [obj, report],
        mnemonic = "Nvcc",
        progress_message = "nvcc %s" % src.short_path,
        use_default_shell_env = True,
    )
    return [
        DefaultInfo(files = depset([obj])),
        OutputGroupInfo(resources = depset([report])),
    ]

cuda_object = rule(
    implementation = _cuda_object_impl,
    attrs = {
        "src": attr.label(allow_single_file = [".cu"], mandatory = True),
        "hdrs": attr.label_list(allow_files = True),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
        "_wrapper": attr.label(
            default = "//tools/bazel:nvcc_compile.sh",
            executable = True,
            cfg = "exec",
            allow_single_file = True,
        ),
        "_archs": attr.label(default = "//tools/bazel:cuda_archs"),
        "_lineinfo": attr.label(default = "//tools/bazel:cuda_lineinfo"),
    },
)

def cuda_objects(name, srcs, hdrs = [], deps = [], copts = [], visibility = None):
    """One cuda_object per .cu file, gathered in a filegroup called `name`.

    One object per small .cu file lets Bazel compile them in parallel and cache each one.
    """
    objs = []
    for src in srcs:
        stem = src[:-len(".cu")].replace("/", "_") + "_cu"
        cuda_object(
            name = stem,
            src = src,
            hdrs = hdrs,
            deps = deps + ["@cuda//:headers", "@cuda//:cccl"],
            copts = copts,
        )
        objs.append(":" + stem)
    native.filegroup(name = name, srcs = objs, visibility = visibility)
    native.filegroup(
        name = name + "_resources",
        srcs = objs,
        output_group = "resources",
        visibility = visibility,
    )

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], **kwargs):
    """nvcc-compiled .cu files as a cc_library (objects + the static CUDA runtime)."""
    cuda_objects(name = name + "_objs", srcs = srcs, hdrs = hdrs, deps = deps, copts = copts)
    native.cc_library(
        name = name,
        srcs = [":" + name + "_objs"],
        hdrs = hdrs,
        deps = deps + ["@cuda//:cudart_static"],
        **kwargs
    )
