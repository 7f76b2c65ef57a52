"""The "jax" transformer and backend: core Functions compiled by `jax.jit` (XLA).

Imported only when asked for (``make_transformer("jax")``): `import axgraph`
never imports JAX, which is an optional extra (``pip install axgraph[jax]``).
"""
from ...errors import AxgraphError


class JaxNotInstalledError(AxgraphError, ImportError):
    """The "jax" (or "gpu") transformer was asked for, but JAX is not installed."""


try:
    import jax  # noqa: F401 - the check that it is installed
except ImportError:  # pragma: no cover - the test environment installs it
    raise JaxNotInstalledError("the jax transformer needs JAX: pip install 'axgraph[jax]' (or a "
                               "JAX build for your accelerator, see JAX's installation guide)"
                               ) from None
