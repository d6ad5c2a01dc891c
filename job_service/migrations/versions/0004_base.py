"""The base revision: the tables as schema version 4 left them.

A new database gets them here, and every later revision after this one. A database from
before Alembic (schema versions 1 to 4: no ``alembic_version``, a ``nbjobs_schema``
table; its service made missing tables and added missing columns at each start) is
brought to the same tables here, whatever it lacks: tables made, columns added, indexes
made. Jobs that ended before ``gpu_seconds_held`` existed get theirs worked out once.

The definitions below are the tables of schema version 4, written out: they never change
with the models (job_service/db.py and the parts' ``store.py``), which later revisions
change instead.

Revision ID: 0004
Revises:
"""

from __future__ import annotations

import contextlib

import sqlalchemy as sa
from alembic import op
from nbjobs.job_service.migrations.steps import ensure_table

revision = "0004"
down_revision = None
branch_labels = None
depends_on = None


# Over 80 lines: schema 4 written out table by table, as that release made it; a
# revision is a record of a schema, read whole.
def upgrade() -> None:
    ensure_table(
        "nbjobs_budget_extensions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("class_name", sa.String(length=255), nullable=False),
        sa.Column("student", sa.String(length=255), nullable=False),
        sa.Column("hours", sa.Float(), nullable=False),
        sa.Column("granted_by", sa.String(length=255), nullable=False),
        sa.Column("granted_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        indexes=[
            ("ix_nbjobs_budget_extensions_class_name", ["class_name"], False, None),
        ],
    )
    ensure_table(
        "nbjobs_definitions",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("user", sa.String(length=255), nullable=False),
        sa.Column("groups", sa.JSON(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("cron", sa.String(length=255), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("start_at", sa.DateTime(), nullable=True),
        sa.Column("end_at", sa.DateTime(), nullable=True),
        sa.Column("catch_up", sa.String(length=8), nullable=False),
        sa.Column("paused", sa.Integer(), nullable=False),
        sa.Column("next_run_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("deleted_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        indexes=[
            ("ix_nbjobs_definitions_due", ["next_run_at", "paused"], False, None),
            ("ix_nbjobs_definitions_user", ["user"], False, None),
        ],
    )
    ensure_table(
        "nbjobs_drains",
        sa.Column("node", sa.String(length=255), nullable=False),
        sa.Column("drained_by", sa.String(length=255), nullable=False),
        sa.Column("drained_at", sa.DateTime(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("node"),
    )
    ensure_table(
        "nbjobs_job_samples",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("gpu_utilization_percent", sa.Float(), nullable=True),
        sa.Column("gpu_memory_used_bytes", sa.BigInteger(), nullable=True),
        sa.Column("gpu_memory_total_bytes", sa.BigInteger(), nullable=True),
        sa.Column("cpu_percent", sa.Float(), nullable=True),
        sa.Column("memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("gpus", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        indexes=[
            ("ix_nbjobs_job_samples_job_at", ["job_id", "at"], False, None),
        ],
    )
    added = ensure_table(
        "nbjobs_jobs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("user", sa.String(length=255), nullable=False),
        sa.Column("groups", sa.JSON(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("flavor", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("priority_set_by", sa.String(length=255), nullable=True),
        sa.Column("priority_set_at", sa.DateTime(), nullable=True),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("output_path", sa.Text(), nullable=False),
        sa.Column("source_file", sa.Text(), nullable=False),
        sa.Column("snapshot_file", sa.Text(), nullable=False),
        sa.Column("output_file", sa.Text(), nullable=False),
        sa.Column("job_dir", sa.Text(), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("time_limit", sa.Float(), nullable=True),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("gpu_equivalents", sa.Float(), nullable=True),
        sa.Column("gpus", sa.JSON(), nullable=False),
        sa.Column("backend_ref", sa.String(length=255), nullable=True),
        sa.Column("claim", sa.String(length=32), nullable=True),
        sa.Column("waiting_reason", sa.Text(), nullable=True),
        sa.Column("submitted_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("input_removed_at", sa.DateTime(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("cells_done", sa.Integer(), nullable=False),
        sa.Column("cells_total", sa.Integer(), nullable=False),
        sa.Column("current_cell", sa.Integer(), nullable=True),
        sa.Column("cancel_requested", sa.Integer(), nullable=False),
        sa.Column("rerun_of", sa.String(length=32), nullable=True),
        sa.Column("node", sa.String(length=255), nullable=True),
        sa.Column("requeues", sa.Integer(), nullable=True),
        sa.Column("gpu_seconds_held", sa.Float(), nullable=True),
        sa.Column("warning", sa.Text(), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=True),
        sa.Column("command", sa.Text(), nullable=True),
        sa.Column("kernel", sa.String(length=255), nullable=True),
        sa.Column("html", sa.Integer(), nullable=True),
        sa.Column("definition_id", sa.String(length=32), nullable=True),
        sa.Column("notified_end", sa.Integer(), nullable=True),
        sa.Column("notified_wait", sa.Integer(), nullable=True),
        sa.Column("definition_run", sa.String(length=32), nullable=True),
        sa.Column("idle_warned_at", sa.DateTime(), nullable=True),
        sa.Column("gpu_busy_seconds", sa.Float(), nullable=True),
        sa.Column("gpu_allocated_seconds", sa.Float(), nullable=True),
        sa.Column("gpu_utilization_mean_percent", sa.Float(), nullable=True),
        sa.Column("gpu_utilization_peak_percent", sa.Float(), nullable=True),
        sa.Column("gpu_memory_peak_bytes", sa.BigInteger(), nullable=True),
        sa.Column("telemetry_summary", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        indexes=[
            ("ix_nbjobs_jobs_definition_id", ["definition_id"], False, None),
            ("ix_nbjobs_jobs_definition_run", ["definition_run"], True, None),
            ("ix_nbjobs_jobs_flavor", ["flavor"], False, None),
            ("ix_nbjobs_jobs_seq", ["seq"], False, None),
            ("ix_nbjobs_jobs_state", ["state"], False, None),
            ("ix_nbjobs_jobs_submitted_at", ["submitted_at"], False, None),
            ("ix_nbjobs_jobs_untold", ["notified_end", "finished_at"], False, None),
            ("ix_nbjobs_jobs_user", ["user"], False, None),
            ("ix_nbjobs_jobs_user_seq", ["user", "seq"], False, None),
        ],
    )
    ensure_table(
        "nbjobs_lease",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=255), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    ensure_table(
        "nbjobs_mail_addresses",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("user", sa.String(length=255), nullable=False),
        sa.Column("address", sa.String(length=320), nullable=False),
        sa.Column("code_hash", sa.String(length=64), nullable=True),
        sa.Column("code_sent_at", sa.DateTime(), nullable=True),
        sa.Column("confirmed_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user", "address", name="uq_nbjobs_mail_address"),
        indexes=[
            ("ix_nbjobs_mail_addresses_user", ["user"], False, None),
        ],
    )
    ensure_table(
        "nbjobs_notifications",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column("user", sa.String(length=255), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=True),
        sa.Column("definition_id", sa.String(length=32), nullable=True),
        sa.Column("event", sa.String(length=32), nullable=False),
        sa.Column("channel", sa.String(length=16), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=False),
        sa.Column("attempts", sa.JSON(), nullable=False),
        sa.Column("claim", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("sent_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
        indexes=[
            ("ix_nbjobs_notifications_due", ["state", "next_attempt_at"], False, None),
            ("ix_nbjobs_notifications_job_id", ["job_id"], False, None),
            ("ix_nbjobs_notifications_user", ["user"], False, None),
        ],
    )
    ensure_table(
        "nbjobs_notify_settings",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("user", sa.String(length=255), nullable=False),
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("webhook", sa.Text(), nullable=True),
        sa.Column("webhook_format", sa.String(length=16), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("queue_minutes", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user", "scope", name="uq_nbjobs_notify_scope"),
        indexes=[
            ("ix_nbjobs_notify_settings_user", ["user"], False, None),
        ],
    )
    ensure_table(
        "nbjobs_schema",
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("version"),
    )
    ensure_table(
        "nbjobs_usage_kept",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("user", sa.String(length=255), nullable=False),
        sa.Column("groups", sa.JSON(), nullable=False),
        sa.Column("flavor", sa.String(length=64), nullable=False),
        sa.Column("node", sa.String(length=255), nullable=True),
        sa.Column("gpus", sa.Float(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=False),
        sa.Column("busy_seconds", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("job_id"),
        indexes=[
            ("ix_nbjobs_usage_kept_finished_at", ["finished_at"], False, None),
            ("ix_nbjobs_usage_kept_user", ["user"], False, None),
        ],
    )
    ensure_table(
        "nbjobs_usage_retired",
        sa.Column("user", sa.String(length=255), nullable=False),
        sa.Column("flavor", sa.String(length=64), nullable=False),
        sa.Column("node", sa.String(length=255), nullable=False),
        sa.Column("held_seconds", sa.Float(), nullable=False),
        sa.Column("busy_seconds", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("user", "flavor", "node"),
    )
    ensure_table(
        "nbjobs_definition_runs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("definition_id", sa.String(length=32), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("scheduled_for", sa.DateTime(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("missed", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("requested_by", sa.String(length=255), nullable=True),
        sa.Column("notified", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["definition_id"],
            ["nbjobs_definitions.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("definition_id", "scheduled_for", name="uq_nbjobs_definition_tick"),
        indexes=[
            ("ix_nbjobs_definition_runs_definition_id", ["definition_id"], False, None),
        ],
    )
    ensure_table(
        "nbjobs_definition_versions",
        sa.Column("definition_id", sa.String(length=32), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("cron", sa.String(length=255), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.ForeignKeyConstraint(
            ["definition_id"],
            ["nbjobs_definitions.id"],
        ),
        sa.PrimaryKeyConstraint("definition_id", "version"),
    )
    if "gpu_seconds_held" in added:
        fill_gpu_seconds_held()


def fill_gpu_seconds_held() -> None:
    """Jobs that ended before the column existed: their GPU-seconds held, worked out once
    from their start and end (in Python: time arithmetic differs between databases). A
    row whose times cannot be read is left without."""
    bind = op.get_bind()
    jobs = sa.table(
        "nbjobs_jobs",
        sa.column("id", sa.String()),
        sa.column("gpu_count", sa.Integer()),
        sa.column("started_at", sa.DateTime()),
        sa.column("finished_at", sa.DateTime()),
        sa.column("gpu_seconds_held", sa.Float()),
    )
    query = sa.select(jobs.c.id, jobs.c.gpu_count, jobs.c.started_at, jobs.c.finished_at).where(
        jobs.c.finished_at.is_not(None), jobs.c.started_at.is_not(None)
    )
    try:
        rows = bind.execute(query).all()
    except (TypeError, ValueError):  # a damaged row: the rows are read one by one
        rows = []
        for (job_id,) in bind.execute(query.with_only_columns(jobs.c.id)).all():
            with contextlib.suppress(TypeError, ValueError):
                rows.extend(bind.execute(query.where(jobs.c.id == job_id)).all())
    values = []
    for job_id, gpu_count, started, finished in rows:
        try:
            held = max(0.0, (finished - started).total_seconds()) * int(gpu_count or 0)
        except (TypeError, ValueError):
            continue
        values.append({"job_id": job_id, "held": held})
    if values:
        fill = sa.update(jobs).where(jobs.c.id == sa.bindparam("job_id"))
        bind.execute(fill.values(gpu_seconds_held=sa.bindparam("held")), values)
