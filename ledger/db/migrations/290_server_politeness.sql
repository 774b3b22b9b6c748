-- Issue 29 item 7 (helper "serverpolite", docs/decisions/241 and 242): politeness per server.
-- group_hosts: 'address' (hosts that resolve to a shared address, with the host's explicit
-- port, are one server: one gap, one lease) or 'domain' (also every host of one registered
-- domain). delay_factor: a slow host's gap ≥ delay_factor × its last page's document time
-- (the flow, f/waggle/slowhost.py; 0 = off), never below the delay.
ALTER TABLE crawls ADD COLUMN group_hosts text NOT NULL DEFAULT 'address'
    CHECK (group_hosts IN ('address', 'domain'));
ALTER TABLE crawls ADD COLUMN delay_factor real NOT NULL DEFAULT 5
    CHECK (delay_factor >= 0 AND delay_factor <= 60);
-- host → its server keys as last resolved ('@a:127.0.0.1:8080', '@d:example.com'): the rows of
-- host_leases and hosts under those keys make hosts of one server share a lease and a gap.
CREATE TABLE host_servers (
    host text PRIMARY KEY,
    keys text[] NOT NULL,
    resolved_at timestamptz NOT NULL DEFAULT now()
);
