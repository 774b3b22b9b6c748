-- The web page's sign-in (issue 16): pending OIDC logins and server-side sessions.
-- The browser holds only an opaque session id (HttpOnly cookie); its SHA-256 is the key here,
-- so a database reader cannot replay a cookie. The access token never reaches the browser.
CREATE TABLE web_logins (
    state          text PRIMARY KEY,
    code_verifier  text NOT NULL,
    nonce          text NOT NULL,
    redirect_uri   text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE web_sessions (
    id_hash        text PRIMARY KEY,
    access_token   text NOT NULL,
    csrf_token     text NOT NULL,
    subject        text NOT NULL,
    expires_at     timestamptz NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX web_sessions_expires_at_idx ON web_sessions (expires_at);
