"""The web dashboard for admins and teachers, served by the job service itself.

At the service's prefix (``/services/nbjobs/`` under a hub, listed in the hub's Services
menu; ``/`` standalone) a page with views per role: the overview of GPUs, queues and the
backend (admins), and usage charts (admins see everyone, teachers their classes, users
themselves). The page is static; everything it shows comes from the job service's API,
which decides what each caller may see, not the page.

Under a hub the page logs in with the hub's OAuth, as any JupyterHub service page does, and
calls the API with the token the hub gave it for this service. Standalone, it asks for one of
the service's API tokens and keeps it in the tab (``sessionStorage``) only.
"""

from .handlers import dashboard_routes

__all__ = ["dashboard_routes"]
