"""``waggle capture serve [flags]``: run one capture server (mounted by :mod:`waggle.cli`).

The flags are :func:`waggle_capture.__main__.parse_args`'s, the same as ``python -m
waggle_capture`` (``waggle capture serve --help`` lists them): one parser, two ways in. The image
(Dockerfile.capture) runs ``waggle capture serve``; the local stack runs ``python -m
waggle_capture``. Playwright is imported only when the server starts, so ``waggle --help``
works where the ``capture`` extra is not installed (the ledger's image).
"""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True)


@app.command(
    "serve",
    # every argument, --help included, goes to the server's own parser
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
)
def serve_cmd(ctx: typer.Context) -> None:
    """Serve the BrowserHive v12 capture API with waggle's extensions (docs/capture-server.md) until
    SIGTERM; ``--help`` lists the flags (host, port, S3, Chromium, budgets, signing)."""
    from waggle_capture.__main__ import main

    main(list(ctx.args), prog="waggle capture serve")
