"""Compiles a GPU MODE submission's CuTe DSL kernels for a named architecture without launching
anything, for `nvfp4-oracle preflight --submission`. Run by the oracle in its sandbox:

    python3 compile_worker.py --submission FILE --arch sm_100a < TOKEN

in a fresh working directory of its own, the one folder it may write.

What it does, in order:
1. It reads TOKEN (the name of its result file) from stdin; CuTe DSL is told, before anything
   imports it, to compile for ARCH (never the GPU it might find) and to keep each kernel's PTX
   in a fresh folder, with its file cache off (a cached kernel would write nothing).
2. The submission is imported as GPU MODE's runner imports it (a `task` module provided).
3. Its compilation is driven: `compile_kernel()` when it defines one with no required
   parameters (GPU MODE's template: it compiles on null pointers), else nothing more; a
   submission that compiles only inside `custom_kernel` needs inputs on a GPU of that
   architecture, which is what preflight exists to do without, so it is reported as such.
4. result-TOKEN.json says what happened: the phase that failed and the compiler's message, or
   for each `cute.compile` the PTX and the lowered host code it returned (whose launch holds
   the block size, the dynamic shared memory and the cluster). Files in the folder are never read as the compiler's output: a
   PTX the submission wrote itself is not what `cute.compile` returned.

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
import tempfile
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


def lines_in_submission(exc, folder):
    """The submission's own lines in the traceback of `exc` and of the exceptions it came from,
    outermost first, innermost (where it went wrong) last: CuTe DSL's own messages point into
    the DSL, or nowhere, for an MLIR verification error."""
    lines, seen, seen_exc = [], set(), set()
    while exc is not None and id(exc) not in seen_exc:
        seen_exc.add(id(exc))
        for frame in traceback.extract_tb(exc.__traceback__):
            path = os.path.abspath(frame.filename)
            if (not path.startswith(folder + os.sep) or "site-packages" in path
                    or "dist-packages" in path or (path, frame.lineno) in seen):
                continue
            seen.add((path, frame.lineno))
            code = (frame.line or "").strip()
            lines.append(f"{os.path.relpath(path, folder)}:{frame.lineno} in {frame.name}"
                         + (f": {code}" if code else ""))
        exc = exc.__cause__ or exc.__context__
    return lines[-6:]


def raised_in_submission(exc, folder):
    """Whether `exc` was raised by the submission's own code (its innermost frame is in the
    submission's folder, outside any installed package): the submission raised, the compiler
    did not refuse."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return False
    path = os.path.abspath(frames[-1].filename)
    return (path.startswith(folder + os.sep) and "site-packages" not in path
            and "dist-packages" not in path)


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
    args = parser.parse_args()
    # The name of the result file, chosen by the oracle for this run and read before any code of
    # the submission runs: a file the submission leaves is not taken for the result unless it
    # goes looking for this process's secrets (see the oracle's submission.rs for what is left).
    token = sys.stdin.readline().strip()
    if not re.fullmatch(r"[0-9a-f]{32}", token):
        sys.exit("compile_worker.py: no result token on stdin (it is run by the oracle)")
    out_dir = os.getcwd()
    result_path = os.path.join(out_dir, f"result-{token}.json")
    del token
    # CuTe DSL's dump folder: fresh, under a name chosen now. Nothing is read back from it by
    # listing it; each kernel's PTX is taken from what `cute.compile` returns.
    dump = tempfile.mkdtemp(prefix="cute-dsl-", dir=out_dir)
    result = {"phase": None, "error": None, "torch": "installed", "driven_by": None,
              "compiles": [], "lines": []}
    folder = os.path.dirname(os.path.abspath(args.submission))
    # What `cute.compile` returned, kept here as it returns: the only source of the result's
    # PTX and host code.
    compiles = result["compiles"]
    write = open  # the submission may replace builtins.open; the result is written with this

    def finish(phase=None, error=None):
        result["phase"] = phase
        result["error"] = error
        with write(result_path, "w") as out:
            json.dump(result, out)
        sys.exit(0)

    os.environ.update({
        "CUTE_DSL_ARCH": args.arch,
        "CUTE_DSL_KEEP": "ptx",
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
    # Every `cute.compile` (with or without options) goes through CompileCallable._compile. What
    # it returns holds the kernels' PTX (artifacts.PTX, read by CuTe DSL from its own dump as it
    # compiled) and the lowered host code, whose launches hold each kernel's dynamic shared
    # memory and block size as constants (the kernel's own code does not: they are set at
    # launch).
    original_compile = CompileCallable._compile

    def compile_and_keep(self, *args, **kwargs):
        compiled = original_compile(self, *args, **kwargs)
        artifacts = getattr(compiled, "artifacts", None)
        ptx = getattr(artifacts, "PTX", None)
        try:
            host = str(compiled.ir_module)
        except Exception:  # noqa: BLE001 - an older or newer CuTe DSL may not have it
            host = ""
        if isinstance(ptx, str) and ".entry" in ptx:
            compiles.append({"ptx": ptx, "host": host})
        return compiled

    CompileCallable._compile = compile_and_keep

    task = types.ModuleType("task")
    task.input_t = tuple
    task.output_t = object
    task.TestSpec = dict
    sys.modules["task"] = task
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location("submission", args.submission)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - a submission may raise anything, SystemExit too
        result["lines"] = lines_in_submission(exc, folder)
        finish("raised" if raised_in_submission(exc, folder) else "import",
               plain(f"{type(exc).__name__}: {exc}") + "\n" + plain(
                   "".join(traceback.format_exception(exc)[-6:])))

    compile_kernel = getattr(module, "compile_kernel", None)
    if callable(compile_kernel) and not required_parameters(compile_kernel):
        result["driven_by"] = "compile_kernel()"
        try:
            compile_kernel()
        except BaseException as exc:  # noqa: BLE001
            result["lines"] = lines_in_submission(exc, folder)
            if raised_in_submission(exc, folder):
                finish("raised", plain(f"{type(exc).__name__}: {exc}") + "\n" + plain(
                    "".join(traceback.format_exception(exc)[-6:])))
            finish("compile", plain(f"{type(exc).__name__}: {exc}"))
    finish()


if __name__ == "__main__":
    main()
