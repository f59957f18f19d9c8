"""Training methods: one module per method, one interface (`prunex.methods.base.Method`), one registry.

`prunex.methods.registry` describes every method (plain data); importing this package stays torch-free
so that config validation and the analysis can read it. :func:`method_class` imports an implementation.
"""

from __future__ import annotations

from prunex.methods.registry import METHOD_NAMES, REGISTRY, MethodInfo, method_class, method_info

__all__ = ["METHOD_NAMES", "REGISTRY", "MethodInfo", "method_class", "method_info"]
