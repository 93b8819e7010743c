"""Find a declared kernel by the one name form every command accepts: ``FILE.py:KERNEL`` or a declared name.

* ``FILE.py:KERNEL``: the file is imported unmodified (with ``neuronxcc.nki`` mapped to the simulator when
  the real SDK is absent) and ``KERNEL`` is a :class:`devkit.KernelSpec` variable, a kernel declared with
  :func:`devkit.declare_kernel`, or the name of a kernel declared in that file;
* ``NAME``: a kernel declared in one of the project's ``[tool.devkit] kernels`` files, else one of the kit's
  NeuronMM kernels (:mod:`devkit.kernels.registry`).

A spec found by file is addressed by its absolute ``FILE.py:KERNEL`` reference (:func:`ref_of`), which
worker processes resolve again; the kit's and the project's kernels are addressed by name.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from devkit import declare, project
from devkit.workflow.kernel_ref import KernelRefError, load_module

#: Absolute FILE.py:KERNEL reference -> spec, and name -> reference of specs found by file.
_BY_REF: dict[str, declare.KernelSpec] = {}
_REF_OF: dict[int, str] = {}
#: Absolute path of each file imported for its kernels -> the names declared there.
_NAMES_IN: dict[str, set[str]] = {}


class UnknownKernelError(KernelRefError):
    """A kernel name that is neither a ``FILE.py:KERNEL`` reference nor a declared name."""


def is_file_ref(ref: str) -> bool:
    return ":" in ref and ref.rsplit(":", 1)[0].endswith(".py")


def kit_specs() -> list[declare.KernelSpec]:
    from devkit.kernels import registry

    return registry.all_specs()


def _load_file(path: Path) -> dict[str, declare.KernelSpec]:
    """Import ``path`` and return the specs it declared (by name)."""
    module = load_module(str(path))
    found = dict(getattr(module, "__devkit_declared__", {}))
    for value in vars(module).values():  # spec variables declared without register()
        if isinstance(value, declare.KernelSpec) and value.name not in found:
            found[value.name] = value
    for n, s in found.items():
        _REF_OF[id(s)] = f"{path}:{n}"
    _NAMES_IN[str(path)] = set(found)
    return found


_PROJECT_LOADED: dict[str, dict[str, declare.KernelSpec]] = {}


def project_specs(proj: project.Project | None = None) -> list[declare.KernelSpec]:
    """Kernels declared in the project's ``[tool.devkit] kernels`` files (declaration order)."""
    proj = proj or project.find()
    out: list[declare.KernelSpec] = []
    for path in proj.kernel_files:
        key = str(path)
        if key not in _PROJECT_LOADED:
            if not path.is_file():
                raise KernelRefError(f"[tool.devkit] kernels: no such file: {path}")
            _PROJECT_LOADED[key] = _load_file(path)
        out.extend(_PROJECT_LOADED[key].values())
    return out


def get(ref: str) -> declare.KernelSpec:
    """The spec named by ``ref`` (see the module docstring); errors name the input and the candidates."""
    if is_file_ref(ref):
        path_text, name = ref.rsplit(":", 1)
        path = Path(path_text).expanduser().resolve()
        key = f"{path}:{name}"
        if key in _BY_REF:
            return _BY_REF[key]
        if not path.is_file():
            raise KernelRefError(f"no such file: {path_text}")
        found = _load_file(path)
        module_specs = dict(found)
        spec = module_specs.get(name)
        if spec is None:
            module = load_module(str(path))
            obj = getattr(module, name, None)
            spec = declare.spec_of(obj) if obj is not None else None
        if spec is None:
            there = ", ".join(sorted(module_specs)) or "none"
            raise UnknownKernelError(
                f"{path_text}: {name!r} is not a declared kernel (declared there: {there}); declare it with "
                "@devkit.declare_kernel(...) or devkit.register(devkit.KernelSpec(...))"
            )
        _BY_REF[key] = spec
        _REF_OF[id(spec)] = key
        return spec
    for spec in project_specs():
        if spec.name == ref:
            return spec
    from devkit.kernels import registry

    if ref in registry.names():
        return registry.get(ref)
    raise UnknownKernelError(
        f"unknown kernel {ref!r}: name a kernel as FILE.py:KERNEL or by a declared name "
        f"({', '.join(names())})"
    )


def file_specs(ref: str) -> list[declare.KernelSpec]:
    """Every kernel declared in the file of a ``FILE.py:KERNEL`` reference ([] for a declared name)."""
    if not is_file_ref(ref):
        return []
    get(ref)  # loads the file (and reports a bad reference)
    path = Path(ref.rsplit(":", 1)[0]).expanduser().resolve()
    return list(_load_file(path).values())


def ref_of(spec: declare.KernelSpec) -> str:
    """How a worker process finds ``spec`` again: its name (kit or project kernel) or FILE.py:KERNEL."""
    ref = _REF_OF.get(id(spec))
    if ref is None:
        return spec.name
    if any(s is spec for s in project_specs()):
        return spec.name
    return ref


def related_ref(spec: declare.KernelSpec, name: str) -> str:
    """How to find the kernel ``name`` that ``spec`` names (a baseline): the kernel of that name declared
    in the same file when ``spec`` was found as ``FILE.py:KERNEL``, else ``name`` (a declared name)."""
    ref = ref_of(spec)
    if is_file_ref(ref):
        path = ref.rsplit(":", 1)[0]
        if name in _NAMES_IN.get(path, ()):
            return f"{path}:{name}"
    return name


def all_specs(*, include_kit: bool | None = None) -> list[declare.KernelSpec]:
    """The project's kernels, then (unless ``[tool.devkit] include_kit = false``) the kit's."""
    proj = project.find()
    ours = project_specs(proj)
    kit = include_kit if include_kit is not None else bool(proj.settings["include_kit"])
    return ours + ([s for s in kit_specs() if s.name not in {o.name for o in ours}] if kit else [])


def names() -> list[str]:
    try:
        return [s.name for s in all_specs(include_kit=True)]
    except Exception:  # a broken project file must not hide the kit's names in an error message
        return [s.name for s in kit_specs()]


def relative(path: str | os.PathLike[str]) -> str:
    """``path`` relative to the project root when inside it (for generated files and messages)."""
    root = project.find().root
    try:
        return str(Path(path).resolve().relative_to(root))
    except ValueError:
        return str(path)


def describe(spec: Any) -> str:
    return f"{spec.name}: {spec.description}" if spec.description else spec.name


class ProjectKernels:
    """What generated hardware tests look kernels up in (``get``, ``max_error``): declared names and
    ``FILE.py:KERNEL`` references relative to the project ``root``; a bare name also finds a kernel
    already loaded by reference.  ``real_sdk=True`` (the hardware stage on a device): kernel files bind to
    the real Neuron SDK, never to the simulator."""

    def __init__(self, root: str | os.PathLike[str], real_sdk: bool = False) -> None:
        self.root = Path(root).resolve()
        self.real_sdk = real_sdk

    def get(self, ref: str) -> declare.KernelSpec:
        if not self.real_sdk:
            return self._get(ref)
        from devkit.workflow.kernel_ref import real_sdk_binding

        with real_sdk_binding():
            return self._get(ref)

    def _get(self, ref: str) -> declare.KernelSpec:
        if is_file_ref(ref):
            path, name = ref.rsplit(":", 1)
            if not os.path.isabs(path):
                ref = f"{self.root / path}:{name}"
            return get(ref)
        for spec in _BY_REF.values():
            if spec.name == ref:
                return spec
        return get(ref)

    @staticmethod
    def max_error(out: Any, ref: Any) -> float:
        return declare.max_error(out, ref)
