"""Spawners for CPU-only notebook servers: Kubernetes (KubeSpawner) and a local twin."""
