"""Child handler (run by `graders.sandbox.run.run_child`): compile one kernel at several launches and read SASS.

Compiling is done here rather than in the grading process because the source is the student's: NVRTC reads
``#include`` files from the filesystem, and inside the sandbox nothing but the graders' own files is there.
"""
from __future__ import annotations

from graders.cuda_engine import sass
from graders.cuda_engine.compile import DEFAULT_ARCH, CompileError, compile_cuda, compile_ptx
from graders.cuda_engine.spec import load_spec, resolve_geometry


def handle(request: dict) -> dict:
    """``{"results": [...]}``, one per launch: ``{"failures", "facts"}``, up to the first that does not
    compile, which is ``{"compile_error"}`` and the last."""
    kernel = load_spec(request["spec_path"]).kernel(request["kernel_id"])
    results = []
    for launch in request["launches"]:
        geometry = resolve_geometry(kernel, launch.get("block"), launch.get("tile"), launch.get("params"))
        try:
            compiled = compile_cuda(request["source"], kernels=(kernel.function,), defines=geometry.defines(),
                                    arch=kernel.launch.arch or DEFAULT_ARCH, libraries=kernel.launch.libraries)
        except CompileError as exc:
            results.append({"compile_error": str(exc)})
            break
        ptx = None
        if set(request["requirements"]) & sass.READS_PTX:
            ptx = compile_ptx(request["source"], defines=geometry.defines(), arch=kernel.launch.arch or DEFAULT_ARCH,
                              libraries=kernel.launch.libraries)
        failures, facts = sass.check(compiled.cubin, kernel.function, request["requirements"],
                                     disassemble_always=request["disassemble"], ptx=ptx)
        results.append({"failures": failures,
                        "facts": facts | {"arch": compiled.arch, "defines": geometry.defines()}})
    return {"results": results}
