"""The user CLI's client of the job service (stdlib only)."""
