"""``nki.builtin`` / ``nki_cpu_simulator.nki.builtin``: the namespace nki-library's harness binds to
``builtins.builtin`` before collecting tests (``reference/nki_beta2.md`` §7).

No public kernel uses a name from it (nki-library @d2ad3a5 only imports the module), so it is empty here;
a kernel that does reach for a name gets an ``AttributeError`` naming it.
"""

from __future__ import annotations

__all__: list[str] = []
