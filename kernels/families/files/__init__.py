"""The family files: each a standalone GPU MODE ``qr_v2`` submission (torch and triton only), with its
knobs in a PARAMS block, their values in a SPACE block and its description in its docstring.  The
packages never import them: the harness loads a file by its path (kernels/families/__init__.py
registers them)."""
