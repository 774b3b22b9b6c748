"""OpenFGA stand-in for tests and the local stack (``python -m devstack.openfga``)."""
