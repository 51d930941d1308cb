"""cofferctl: a light client for cofferd over its Unix socket (stdlib only)."""
