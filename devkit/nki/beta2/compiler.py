"""``nki.compiler``: compiler-facing decorators and hints of NKI 0.x, and the Beta-1 direct allocators.

In the simulator every hint is accepted and has no effect on values (it runs the kernel in program order).
"""

from __future__ import annotations

from devkit.nki.compiler import *  # noqa: F403
