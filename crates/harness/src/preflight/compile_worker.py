"""Compiles a GPU MODE submission's CuTe DSL kernels for a named architecture without launching
anything, for `nvfp4-oracle preflight --submission`. Run by the oracle in its sandbox:

    python3 compile_worker.py --submission FILE --arch sm_100a --dump DIR

What it does, in order:
1. CuTe DSL is told, before anything imports it, to compile for ARCH (never the GPU it might
   find) and to keep each kernel's PTX, cubin and IR in DIR, with its file cache off (a cached
   kernel would write nothing).
2. The submission is imported as GPU MODE's runner imports it (a `task` module provided).
3. Its compilation is driven: `compile_kernel()` when it defines one with no required
   parameters (GPU MODE's template: it compiles on null pointers), else nothing more; a
   submission that compiles only inside `custom_kernel` needs inputs on a GPU of that
   architecture, which is what preflight exists to do without, so it is reported as such.
4. DIR/result.json says what happened: the phase that failed and the compiler's message, or
   the files written (PTX, cubin, IR, and host-N.mlir: the lowered host code of each
   `cute.compile`, whose launch holds the dynamic shared memory). The oracle reads them itself.

Where torch is not installed (a machine with no GPU, where a CUDA torch is gigabytes), a
placeholder module stands in for it, so that submissions which only name torch at import (type
hints, dtype tables) still compile; any use of it at compile time fails with a message saying so.
"""
import argparse
import importlib.abc
import importlib.machinery
import inspect
import json
import os
import re
import sys
import traceback
import types


def placeholder_torch():
    """A `torch` whose every attribute and submodule is a placeholder: enough for code that
    names torch without running it."""

    class Placeholder:
        def __init__(self, name):
            self._name = name

        def __getattr__(self, attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return Placeholder(f"{self._name}.{attr}")

        def __call__(self, *args, **kwargs):
            raise RuntimeError(
                f"{self._name}() was called, but torch is not installed here (a placeholder "
                f"stands in for it): install torch beside nvidia-cutlass-dsl to preflight a "
                f"submission that uses torch while it compiles")

        def __getitem__(self, item):
            return self

        def __or__(self, other):
            return self

        __ror__ = __or__

        def __repr__(self):
            return f"<placeholder {self._name}>"

    class PlaceholderModule(types.ModuleType):
        def __getattr__(self, attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return Placeholder(f"{self.__name__}.{attr}")

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec):
            module = PlaceholderModule(spec.name)
            module.__path__ = []
            return module

        def exec_module(self, module):
            pass

    sys.meta_path.insert(0, Finder())


def plain(text):
    """The compiler's message without terminal colours."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text).strip()


def required_parameters(function):
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return []
    return [p.name for p in signature.parameters.values()
            if p.default is inspect.Parameter.empty
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--submission", required=True)
    parser.add_argument("--arch", required=True)
    parser.add_argument("--dump", required=True)
    args = parser.parse_args()
    dump = os.path.abspath(args.dump)
    os.makedirs(dump, exist_ok=True)  # CuTe DSL writes nothing into a missing folder, silently
    result = {"phase": None, "error": None, "torch": "installed", "driven_by": None}

    def finish(phase=None, error=None):
        result["phase"] = phase
        result["error"] = error
        result["files"] = sorted(os.listdir(dump))
        with open(os.path.join(dump, "result.json"), "w") as out:
            json.dump(result, out)
        sys.exit(0)

    os.environ.update({
        "CUTE_DSL_ARCH": args.arch,
        "CUTE_DSL_KEEP": "ptx,cubin,ir",
        "CUTE_DSL_DUMP_DIR": dump,
        "CUTE_DSL_DISABLE_FILE_CACHING": "1",
    })
    try:
        import torch  # noqa: F401
    except ImportError:
        placeholder_torch()
        result["torch"] = "placeholder"
    try:
        from cutlass.base_dsl.compiler import CompileCallable
    except ImportError as exc:
        finish("no-cute-dsl", f"CuTe DSL is not installed for {sys.executable} ({exc}): "
                              f"pip install nvidia-cutlass-dsl")
    # Every `cute.compile` (with or without options) goes through CompileCallable._compile; the
    # host code it returns holds each launch's dynamic shared memory and block size as constants
    # (the kernel's own files do not: they are set at launch), so its lowered IR is kept too.
    compiled = []
    original_compile = CompileCallable._compile

    def compile_and_keep_host_ir(self, *args, **kwargs):
        result = original_compile(self, *args, **kwargs)
        try:
            text = str(result.ir_module)
        except Exception:  # noqa: BLE001 - an older or newer CuTe DSL may not have it
            text = None
        if text:
            compiled.append(result)
            with open(os.path.join(dump, f"host-{len(compiled)}.mlir"), "w") as out:
                out.write(text)
        return result

    CompileCallable._compile = compile_and_keep_host_ir

    task = types.ModuleType("task")
    task.input_t = tuple
    task.output_t = object
    task.TestSpec = dict
    sys.modules["task"] = task
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.submission)))
    try:
        spec = importlib.util.spec_from_file_location("submission", args.submission)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - a submission may raise anything, SystemExit too
        finish("import", plain(f"{type(exc).__name__}: {exc}") + "\n" + plain(
            "".join(traceback.format_exception(exc)[-6:])))

    compile_kernel = getattr(module, "compile_kernel", None)
    if callable(compile_kernel) and not required_parameters(compile_kernel):
        result["driven_by"] = "compile_kernel()"
        try:
            compile_kernel()
        except BaseException as exc:  # noqa: BLE001
            finish("compile", plain(f"{type(exc).__name__}: {exc}"))
    finish()


if __name__ == "__main__":
    main()
