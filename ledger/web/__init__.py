"""The web page a person uses (issue 16): OIDC sign-in with server-side sessions, the app shell
and its static ES modules, and ReplayWeb.page served from the ledger's own origin."""
