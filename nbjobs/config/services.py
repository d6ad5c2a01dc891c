"""The network rules for jobs and sign-in, schedules, and how users are told (email,
webhooks, their rates)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from .values import Duration, _Model


def _network(value: str, where: str) -> str:
    """An IPv4 or IPv6 network as Kubernetes and nbjobs read it (``10.20.0.0/16``; a
    single address gets /32 or /128); a sentence for anything else."""
    try:
        network = ipaddress.ip_network(value.strip(), strict=True)
    except ValueError as exc:
        raise ValueError(
            f"{where}: {value!r} is not a network like 10.20.0.0/16 or 2001:db8::/32 ({exc})"
        ) from None
    return str(network)


class EgressRule(_Model):
    """Addresses the pods may open connections to."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    #: a network (``10.20.0.0/16``, ``0.0.0.0/0`` for every IPv4 address)
    cidr: str
    #: networks inside ``cidr`` left out (``169.254.169.254/32``, a cloud's metadata)
    except_: list[str] = Field(default=[], alias="except")
    #: the ports they may reach there; none: every port
    ports: list[int] = []
    #: the protocol of ``ports``
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"

    @model_validator(mode="after")
    def _checked(self) -> EgressRule:
        cidr = ipaddress.ip_network(_network(self.cidr, "cidr"))
        for inner in self.except_:
            left_out = ipaddress.ip_network(_network(inner, "except"))
            if left_out.version != cidr.version or not left_out.subnet_of(cidr):  # type: ignore[arg-type]
                raise ValueError(f"except: {inner} is not inside {self.cidr}")
        for port in self.ports:
            if not 1 <= port <= 65535:
                raise ValueError(f"ports: {port} is not a port (1 to 65535)")
        return self


class PodNetwork(_Model):
    """Where the pods of one kind may connect to."""

    #: None (the default): anywhere, as the cluster allows. A list: only these
    #: destinations (an empty list: none), plus DNS when ``dns`` is true and what nbjobs
    #: itself needs (a notebook server reaches the hub and its proxy)
    egress: list[EgressRule] | None = None
    #: with ``egress`` rules: may the pods ask the cluster's DNS (port 53, UDP and TCP)?
    dns: bool = True


class SignInNetwork(_Model):
    """Where people may sign in to the hub from."""

    #: client networks allowed to sign in (``10.0.0.0/8``, ``2001:db8::/32``); empty (the
    #: default): from anywhere
    allow: list[str] = []
    #: proxies whose ``X-Forwarded-For`` is believed: the hub's own proxy on this machine
    #: (the default) and, on a cluster, the proxy pods' and load balancers' networks
    trusted_proxies: list[str] = ["127.0.0.0/8", "::1/128"]

    @field_validator("allow", "trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str], info: Any) -> list[str]:
        return [_network(v, info.field_name) for v in value]


class NetworkConfig(_Model):
    """Network allow-lists: where jobs and notebook servers may connect to (as
    Kubernetes NetworkPolicies, which the cluster's network plugin enforces), and where
    people may sign in from."""

    #: the pods of GPU jobs
    jobs: PodNetwork = PodNetwork()
    #: users' notebook servers
    servers: PodNetwork = PodNetwork()
    #: the hub's sign-in
    sign_in: SignInNetwork = SignInNetwork()


class SchedulesConfig(_Model):
    """Job definitions that run on a schedule (``nbjobs schedule create``)."""

    #: the shortest time a schedule may leave between two runs (a cron expression that
    #: would run more often is refused when it is saved)
    min_interval: Duration = 60.0
    #: how often the service looks for definitions that are due (a run starts at most
    #: this late after its time)
    check_every: Duration = Field(default=15.0, ge=1, le=60)
    #: the time zone of a schedule that names none
    default_timezone: str = "UTC"
    #: the most definitions one user may keep (paused ones count)
    max_per_user: int = Field(default=100, ge=0)


class EmailConfig(_Model):
    """Mail about jobs, through the organisation's SMTP server."""

    #: the SMTP server's host name (``smtp.example.org``); required
    smtp_host: str
    #: the SMTP server's port: 587 with ``starttls``, 465 with ``ssl``, often 25 for a relay
    smtp_port: int = Field(default=587, ge=1, le=65535)
    #: the sender address
    from_: str = Field(alias="from", min_length=3)
    #: ``starttls`` (port 587), ``ssl`` (port 465) or ``none`` (a relay on localhost)
    security: Literal["starttls", "ssl", "none"] = "starttls"
    #: the account to log in to the server with; None: mail is sent without logging in
    username: str | None = None
    #: a file holding the password (a mounted Secret), read at each login; never write the
    #: password itself in nbjobs.yaml
    password_file: Path | None = None
    #: the job service's environment variable holding the password (``SMTP_PASSWORD``); used when
    #: ``password_file`` is not set (the file wins when both are)
    password_env: str | None = None
    #: the domains users may send mail to (``example.org`` also allows its subdomains);
    #: empty: any domain
    allowed_domains: list[str] = []
    #: how long the server may take to connect, or to answer a command, before the attempt fails
    #: (``20``, ``1m``)
    timeout: Duration = 20.0
    #: a PEM file of the certificate authorities that signed the server's certificate, for a
    #: server whose certificate the system does not trust (an internal relay with a private
    #: CA); only these are trusted then. None: the system's. The host name is checked either way
    ca_file: Path | None = None
    #: a user's hub name is their mail address (an OAuth hub whose user names are the
    #: addresses it verified): mail to that one address needs no confirmation. Leave it
    #: off where users choose their own names; then every address is confirmed by a
    #: code mailed to it before anything else is sent there
    names_are_addresses: bool = False

    @field_validator("allowed_domains")
    @classmethod
    def _lower(cls, value: list[str]) -> list[str]:
        return [d.strip().lower().lstrip("@").lstrip(".") for d in value if d.strip()]


class WebhookConfig(_Model):
    """JSON POSTs about jobs to the hosts admins allow (chat tools, automation)."""

    #: ``host`` (on port 443, or 80 over http) or ``host:port`` users may send to; a
    #: webhook to any other host or port is refused when it is set, so the service cannot be
    #: made to call internal addresses
    allowed_hosts: list[str] = []
    #: ``http://`` to an allowed host too (a test or a relay inside the cluster); else
    #: webhooks must be ``https://``
    allow_http: bool = False
    #: how long a webhook may take to connect, and to answer in full, before the attempt fails
    #: (``10``, ``30s``)
    timeout: Duration = 10.0

    @field_validator("allowed_hosts")
    @classmethod
    def _lower(cls, value: list[str]) -> list[str]:
        return [h.strip().lower() for h in value if h.strip()]


class NotifyRateConfig(_Model):
    """How many messages one user is sent, per channel, before the rest wait for one
    summary."""

    #: messages per user and channel within ``period``; past them the rest are held and
    #: sent as one summary once the period has room again
    messages: int = Field(default=10, ge=1, le=10_000)
    #: the window the messages are counted in (``1h``, ``30m``)
    period: Duration = 3600.0


class NotificationsConfig(_Model):
    """Telling users when their jobs end (or wait long), by email and webhook; JupyterLab
    always tells them while it is open."""

    #: mail through an SMTP server; None: no mail is sent, and users cannot ask for it
    email: EmailConfig | None = None
    #: webhooks to the hosts admins allow; None: none are sent, and users cannot set one
    webhook: WebhookConfig | None = None
    #: where links in messages point: the hub's public address (``https://hub.example.org``);
    #: None: messages name the output and the job instead of linking them
    links_base: str | None = None
    #: attempts per message before it is given up (each recorded)
    attempts: int = Field(default=5, ge=1, le=20)
    #: the wait after the first failed attempt; it doubles each time, up to ``max_delay``
    first_delay: Duration = 30.0
    #: the longest wait between two attempts (the doubling of ``first_delay`` stops there)
    max_delay: Duration = 3600.0
    #: at most this many messages per user and channel; the rest are summarised
    rate_limit: NotifyRateConfig = NotifyRateConfig()
