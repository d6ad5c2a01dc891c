"""Job backends: where a job the service decided to start actually runs."""

from .base import Backend, Launched, LaunchSpec, NodeGpus, Outcome, Seen

__all__ = ["Backend", "LaunchSpec", "Launched", "NodeGpus", "Outcome", "Seen"]
