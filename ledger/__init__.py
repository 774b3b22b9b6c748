"""waggle's ledger service and client."""

import warnings

# pgserver (the embedded Postgres) keeps its lock file under the XDG runtime directory and warns,
# with a source line, when XDG_RUNTIME_DIR is unset (every root shell here); /tmp/runtime-UID is
# fine for it, and the warning was the first thing a new user's `scripts/demo` printed
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
